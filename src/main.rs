//! The `hermes` binary: parse the command line and hand over to the library.

fn main() -> std::process::ExitCode {
    hermes::cli::main()
}
