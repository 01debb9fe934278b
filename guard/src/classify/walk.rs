//! The walk over bash's syntax tree: every simple command reached, with its scope, its
//! standard input and its redirections, whether it runs in a pipe, a subshell, a function
//! body, a loop or a substitution.

use super::expand::Field;
use super::invocation::{Invocation, Producer, Stdin, program_name};
use super::judge::Judge;
use super::rules::write::Via;
use crate::keys;
use brush_parser::ast;

impl Judge<'_> {
    pub(crate) fn program(&mut self, program: &ast::Program) {
        for list in &program.complete_commands {
            self.compound_list(list);
        }
    }

    fn compound_list(&mut self, list: &ast::CompoundList) {
        for ast::CompoundListItem(and_or, separator) in &list.0 {
            let background = matches!(separator, ast::SeparatorOperator::Async);
            self.pipeline(&and_or.first, background);
            if !and_or.additional.is_empty() {
                self.conditionally(|judge| {
                    for ast::AndOr::And(pipeline) | ast::AndOr::Or(pipeline) in &and_or.additional {
                        judge.pipeline(pipeline, background);
                    }
                });
            }
        }
    }

    fn pipeline(&mut self, pipeline: &ast::Pipeline, background: bool) {
        let piped = pipeline.seq.len() > 1;
        let mut producers: Vec<Producer> = Vec::new();
        for command in &pipeline.seq {
            let first = self.invoked.len();
            let stdin = if producers.is_empty() { self.stdin.clone() } else { Stdin::Pipe(producers.clone()) };
            if piped {
                // Each part of a pipe runs in a subshell of its own.
                self.in_subshell(|judge| judge.command(command, stdin, background, piped));
            } else {
                self.command(command, stdin, background, piped);
            }
            producers.extend(self.invoked.get(first..).unwrap_or_default().iter().cloned());
        }
    }

    fn command(&mut self, command: &ast::Command, stdin: Stdin, background: bool, piped: bool) {
        match command {
            ast::Command::Simple(simple) => self.simple_command(simple, stdin, background, piped),
            ast::Command::Compound(compound, redirects) => {
                let stdin = self.redirects(redirects.iter().flat_map(|list| &list.0)).unwrap_or(stdin);
                let outer = std::mem::replace(&mut self.stdin, stdin);
                self.compound(compound);
                self.stdin = outer;
            }
            ast::Command::Function(function) => self.function(function),
            ast::Command::ExtendedTest(test, redirects) => {
                self.redirects(redirects.iter().flat_map(|list| &list.0));
                self.extended_test(&test.expr);
            }
        }
    }

    fn compound(&mut self, compound: &ast::CompoundCommand) {
        match compound {
            ast::CompoundCommand::Arithmetic(arithmetic) => self.substitutions_in(&arithmetic.expr.value),
            ast::CompoundCommand::ArithmeticForClause(clause) => {
                for expression in [&clause.initializer, &clause.condition, &clause.updater].into_iter().flatten() {
                    self.substitutions_in(&expression.value);
                }
                self.conditionally(|judge| judge.compound_list(&clause.body.list));
            }
            ast::CompoundCommand::BraceGroup(group) => self.compound_list(&group.list),
            ast::CompoundCommand::Subshell(subshell) => self.in_subshell(|judge| judge.compound_list(&subshell.list)),
            ast::CompoundCommand::ForClause(clause) => {
                for value in clause.values.iter().flatten() {
                    self.fields(&value.value);
                }
                self.scope.assign(&clause.variable_name, None, true);
                self.conditionally(|judge| judge.compound_list(&clause.body.list));
            }
            ast::CompoundCommand::CaseClause(clause) => {
                self.single(&clause.value.value);
                self.conditionally(|judge| {
                    for item in &clause.cases {
                        for pattern in &item.patterns {
                            judge.single(&pattern.value);
                        }
                        if let Some(list) = &item.cmd {
                            judge.compound_list(list);
                        }
                    }
                });
            }
            ast::CompoundCommand::IfClause(clause) => {
                self.compound_list(&clause.condition);
                self.conditionally(|judge| {
                    judge.compound_list(&clause.then);
                    for branch in clause.elses.iter().flatten() {
                        if let Some(condition) = &branch.condition {
                            judge.compound_list(condition);
                        }
                        judge.compound_list(&branch.body);
                    }
                });
            }
            ast::CompoundCommand::WhileClause(clause) | ast::CompoundCommand::UntilClause(clause) => {
                self.conditionally(|judge| {
                    judge.compound_list(&clause.0);
                    judge.compound_list(&clause.1.list);
                });
            }
            ast::CompoundCommand::Coprocess(coprocess) => {
                let stdin = self.stdin.clone();
                self.in_subshell(|judge| judge.command(&coprocess.body, stdin, true, false));
            }
        }
    }

    /// A function body is judged where it is defined, whether or not it is ever called.
    fn function(&mut self, function: &ast::FunctionDefinition) {
        self.defining.push(program_name(&function.fname.value));
        let ast::FunctionBody(body, redirects) = &function.body;
        self.in_subshell(|judge| {
            judge.conditionally(|judge| {
                judge.redirects(redirects.iter().flat_map(|list| &list.0));
                judge.compound(body);
            });
        });
        self.defining.pop();
    }

    fn extended_test(&mut self, expression: &ast::ExtendedTestExpr) {
        match expression {
            ast::ExtendedTestExpr::And(left, right) | ast::ExtendedTestExpr::Or(left, right) => {
                self.extended_test(left);
                self.extended_test(right);
            }
            ast::ExtendedTestExpr::Not(inner) | ast::ExtendedTestExpr::Parenthesized(inner) => self.extended_test(inner),
            ast::ExtendedTestExpr::UnaryTest(_, word) => {
                self.single(&word.value);
            }
            ast::ExtendedTestExpr::BinaryTest(_, left, right) => {
                self.single(&left.value);
                self.single(&right.value);
            }
        }
    }

    fn simple_command(&mut self, command: &ast::SimpleCommand, stdin: Stdin, background: bool, piped: bool) {
        let mut argv: Vec<Field> = Vec::new();
        let mut assignments: Vec<(String, Field)> = Vec::new();
        let mut redirects: Vec<&ast::IoRedirect> = Vec::new();
        for item in command.prefix.iter().flat_map(|prefix| &prefix.0) {
            match item {
                ast::CommandPrefixOrSuffixItem::AssignmentWord(assignment, _) => assignments.push(self.assignment(assignment)),
                other => self.argument(other, &mut argv, &mut redirects),
            }
        }
        if let Some(word) = &command.word_or_name {
            argv.extend(self.fields(&word.value));
        }
        for item in command.suffix.iter().flat_map(|suffix| &suffix.0) {
            match item {
                // `export X=1`: an argument to the builtin, which the rules read.
                ast::CommandPrefixOrSuffixItem::AssignmentWord(_, word) => argv.push(self.single(&word.value)),
                other => self.argument(other, &mut argv, &mut redirects),
            }
        }
        let stdin = self.redirects(redirects.into_iter()).unwrap_or(stdin);
        let Some(invocation) = Invocation::new(argv, stdin, background, self.scope.cwd.clone()) else {
            let conditional = self.conditional > 0;
            for (name, value) in assignments {
                self.scope.assign(&name, value.known().map(str::to_owned), conditional);
            }
            return;
        };
        if invocation.program.dynamic || invocation.program.glob {
            self.flag(keys::DYNAMIC_COMMAND_NAME, invocation.program.text.clone());
        }
        if self.defining.contains(&invocation.name) && (piped || background) {
            self.flag(keys::FORK_BOMB, format!("function {} starts copies of itself", invocation.name));
        }
        self.check_made_executable(&invocation);
        let document = match &invocation.stdin {
            Stdin::Document(document) => Some(document.clone()),
            _ => None,
        };
        let wrapper = invocation.name.clone();
        let peeled = self.peel(invocation);
        let producer = match &peeled {
            Some(invocation) => Producer { name: invocation.name.clone(), args: invocation.args.clone(), document },
            None => Producer { name: wrapper, args: Vec::new(), document },
        };
        if let Some(invocation) = peeled {
            self.judge_invocation(&invocation);
        }
        self.invoked.push(producer);
    }

    fn argument<'w>(&mut self, item: &'w ast::CommandPrefixOrSuffixItem, argv: &mut Vec<Field>, redirects: &mut Vec<&'w ast::IoRedirect>) {
        match item {
            ast::CommandPrefixOrSuffixItem::IoRedirect(redirect) => redirects.push(redirect),
            ast::CommandPrefixOrSuffixItem::Word(word) => argv.extend(self.fields(&word.value)),
            ast::CommandPrefixOrSuffixItem::ProcessSubstitution(_, subshell) => {
                let names = self.process_substitution(subshell).into_iter().map(|producer| producer.name).collect();
                argv.push(Field { text: "<(…)".to_owned(), dynamic: true, substituted: names, process: true, ..Field::default() });
            }
            ast::CommandPrefixOrSuffixItem::AssignmentWord(_, word) => argv.push(self.single(&word.value)),
        }
    }

    fn assignment(&mut self, assignment: &ast::Assignment) -> (String, Field) {
        let name = match &assignment.name {
            ast::AssignmentName::VariableName(name) | ast::AssignmentName::ArrayElementName(name, _) => name.clone(),
        };
        let value = match &assignment.value {
            ast::AssignmentValue::Scalar(word) if !assignment.append => self.single(&word.value),
            ast::AssignmentValue::Scalar(word) => Field { dynamic: true, ..self.single(&word.value) },
            ast::AssignmentValue::Array(elements) => {
                for (index, element) in elements {
                    if let Some(index) = index {
                        self.single(&index.value);
                    }
                    self.fields(&element.value);
                }
                Field::unknown("(…)")
            }
        };
        (name, value)
    }

    fn process_substitution(&mut self, subshell: &ast::SubshellCommand) -> Vec<Producer> {
        let first = self.invoked.len();
        self.in_subshell(|judge| judge.compound_list(&subshell.list));
        self.invoked.get(first..).map(<[Producer]>::to_vec).unwrap_or_default()
    }

    /// Judges the redirections' targets; returns the standard input they set up, if any.
    fn redirects<'r>(&mut self, redirects: impl Iterator<Item = &'r ast::IoRedirect>) -> Option<Stdin> {
        let mut stdin = None;
        for redirect in redirects {
            let reads_stdin = |fd: &Option<ast::IoFd>| fd.is_none_or(|fd| fd == 0);
            match redirect {
                ast::IoRedirect::File(fd, kind, target) => match (kind, target) {
                    (_, ast::IoFileRedirectTarget::Fd(_)) => {}
                    (ast::IoFileRedirectKind::Read, ast::IoFileRedirectTarget::Filename(word)) => {
                        self.single(&word.value);
                        if reads_stdin(fd) {
                            stdin = Some(Stdin::File);
                        }
                    }
                    (_, ast::IoFileRedirectTarget::Filename(word)) => {
                        let file = self.single(&word.value);
                        let cwd = self.scope.cwd.clone();
                        self.written(&file, cwd.as_deref(), Via::Redirect);
                    }
                    (_, ast::IoFileRedirectTarget::ProcessSubstitution(_, subshell)) => {
                        let produced = self.process_substitution(subshell);
                        if matches!(kind, ast::IoFileRedirectKind::Read) && reads_stdin(fd) {
                            stdin = Some(Stdin::Pipe(produced));
                        }
                    }
                    (kind, ast::IoFileRedirectTarget::Duplicate(word)) => {
                        let target = self.single(&word.value);
                        // `>&file` (not a descriptor number or `-`) writes the file, like `&>file`.
                        let names_file = target.dynamic
                            || !(target.text == "-" || target.text.trim_end_matches('-').chars().all(|c| c.is_ascii_digit()));
                        if matches!(kind, ast::IoFileRedirectKind::DuplicateOutput) && names_file {
                            let cwd = self.scope.cwd.clone();
                            self.written(&target, cwd.as_deref(), Via::Redirect);
                        }
                    }
                },
                ast::IoRedirect::HereDocument(fd, document) => {
                    let text = if document.requires_expansion {
                        self.heredoc(&document.doc.value)
                    } else {
                        Field::literal(document.doc.value.clone())
                    };
                    if reads_stdin(fd) {
                        stdin = Some(Stdin::Document(text));
                    }
                }
                ast::IoRedirect::HereString(fd, word) => {
                    let text = self.single(&word.value);
                    if reads_stdin(fd) {
                        stdin = Some(Stdin::Document(text));
                    }
                }
                ast::IoRedirect::OutputAndError(word, _) => {
                    let file = self.single(&word.value);
                    let cwd = self.scope.cwd.clone();
                    self.written(&file, cwd.as_deref(), Via::Redirect);
                }
            }
        }
        stdin
    }

    /// `chmod +x f; ./f`: running a file the same command made executable.
    fn check_made_executable(&mut self, invocation: &Invocation) {
        if invocation.program.dynamic || !invocation.program.text.contains('/') {
            return;
        }
        let program = self.context.absolute(&invocation.program.text, invocation.cwd.as_deref());
        if program.is_some_and(|program| self.scope.made_executable.contains(&program)) {
            self.flag(keys::CHMOD_THEN_EXECUTE, invocation.program.text.clone());
        }
    }
}
