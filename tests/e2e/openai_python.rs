//! The official `openai` Python client against our API server: a real client nobody here wrote.
//! `.ci/run` installs it from PyPI; set `HERMES_TEST_PYTHON` to use another interpreter.

use crate::support::{API_KEY, Setup};
use hermes_fakes::FakeLlm;
use std::process::Command;

#[tokio::test(flavor = "multi_thread")]
async fn official_openai_python_client_works() {
    let python = std::env::var("HERMES_TEST_PYTHON").unwrap_or_else(|_| "python3".to_string());
    let probe = Command::new(&python).args(["-c", "import openai; print(openai.__version__)"]).output();
    let version = match probe {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout).trim().to_string(),
        _ => panic!(
            "this test needs the official openai Python package: run `{python} -m pip install openai` (bash .ci/run does), or set HERMES_TEST_PYTHON"
        ),
    };
    let llm = FakeLlm::start().await;
    let setup = Setup::new(&llm.base_url());
    let gateway = setup.start().await;
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/e2e/openai_client.py");
    let out = tokio::process::Command::new(&python)
        .arg(script)
        .env("HERMES_API_BASE", setup.api("/v1"))
        .env("HERMES_API_KEY", API_KEY)
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "openai {version} client failed:\n{stdout}\n{stderr}\ngateway log:\n{}", gateway.log_text());
    assert!(stdout.contains("ALL OK"), "{stdout}");
    // The history check inside the script is confirmed on the model's side as well.
    let last = llm.requests().last().cloned().unwrap();
    assert!(last.messages().iter().any(|(_, c)| c == "remember the word zebra"), "{:?}", last.messages());
}
