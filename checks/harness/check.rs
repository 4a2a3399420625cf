// The check program's harness for Rust, appended to the candidate (after the generated check functions) and built
// with it inside the sandbox. Each check is a `fn() -> (bool, String)` (passed, what came back, shown with {:?});
// `__rd_run` runs each one in a child process of its own (this program again, with `--check I`), so a check that
// loops is killed at its time limit and one that panics or overflows its stack is that check's error, and writes one
// line per check to the report descriptor in the Python harness's format:
//   {"loaded": True} | {"i": 0, "status": "passed", "got": "..."}
// Values compare with ==.

const __RD_ANSWER: &str = "\u{1e}answer\t"; // marks the child's answer among whatever the candidate prints

fn __rd_quote(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn __rd_cut(text: &str) -> String {
    if text.chars().count() <= 300 {
        return text.to_string();
    }
    text.chars().take(297).collect::<String>() + "..."
}

fn __rd_answer(check: fn() -> (bool, String)) -> ! {
    use std::io::Write;
    std::panic::set_hook(Box::new(|_| {}));
    let (status, got) = match std::panic::catch_unwind(check) {
        Ok((passed, got)) => (if passed { "passed" } else { "failed" }, got),
        Err(payload) => {
            let message = payload
                .downcast_ref::<&str>()
                .map(|m| m.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            ("error", format!("panicked: {}", message))
        }
    };
    let mut out = std::io::stdout();
    let _ = write!(out, "\n{}{}\t{}\n", __RD_ANSWER, status, __rd_cut(&got).replace('\n', "\u{1f}"));
    let _ = out.flush();
    std::process::exit(0);
}

fn __rd_await(index: usize, limit_ms: u64) -> (String, String) {
    use std::io::Read;
    use std::os::unix::process::ExitStatusExt;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(err) => return ("error".into(), format!("the check could not start: {}", err)),
    };
    let spawned = Command::new(exe)
        .args(["--check", &index.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(err) => return ("error".into(), format!("the check could not start: {}", err)),
    };
    let mut stdout = child.stdout.take().expect("piped");
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut tail: Vec<u8> = Vec::new();
        let mut chunk = [0u8; 4096];
        while let Ok(n) = stdout.read(&mut chunk) {
            if n == 0 {
                break;
            }
            tail.extend_from_slice(&chunk[..n]);
            if tail.len() > 65536 {
                tail.drain(..tail.len() - 8192);
            }
        }
        let _ = sender.send(tail);
    });
    let deadline = Instant::now() + Duration::from_millis(limit_ms);
    let said = receiver.recv_timeout(deadline.saturating_duration_since(Instant::now()));
    let ended_in_time = said.is_ok();
    if !ended_in_time {
        let _ = child.kill();
    }
    let status = child.wait();
    let said = match said {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(_) => return ("timeout".into(), format!("no answer within {} s", limit_ms as f64 / 1000.0)),
    };
    if let Some(at) = said.rfind(__RD_ANSWER) {
        let line = said[at + __RD_ANSWER.len()..].trim_end_matches('\n');
        if let Some((status, got)) = line.split_once('\t') {
            return (status.to_string(), got.replace('\u{1f}', "\n"));
        }
    }
    match status {
        Ok(status) if status.signal().is_some() => {
            let name = match status.signal().unwrap_or(0) {
                6 => "SIGABRT: an abort, or a stack overflow".to_string(),
                9 => "SIGKILL".to_string(),
                11 => "SIGSEGV".to_string(),
                24 => "SIGXCPU: its CPU time ran out".to_string(),
                other => format!("signal {}", other),
            };
            ("error".into(), format!("the check crashed ({})", name))
        }
        Ok(status) => ("error".into(), format!("the check ended ({}) without an answer", status)),
        Err(err) => ("error".into(), format!("the check could not be waited for: {}", err)),
    }
}

fn __rd_run(checks: &[fn() -> (bool, String)], limit_ms: u64) {
    use std::io::Write;
    use std::os::unix::io::FromRawFd;
    let args: Vec<String> = std::env::args().collect();
    if args.len() == 3 && args[1] == "--check" {
        let index: usize = args[2].parse().expect("a check's index");
        __rd_answer(checks[index]);
    }
    let fd: i32 = std::env::var("REPORT_FD").ok().and_then(|v| v.parse().ok()).unwrap_or(1);
    let mut report = std::mem::ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(fd) });
    let _ = report.write_all(b"{\"loaded\": True}\n");
    for index in 0..checks.len() {
        let (status, got) = __rd_await(index, limit_ms);
        let line = format!(
            "{{\"i\": {}, \"status\": {}, \"got\": {}}}\n",
            index,
            __rd_quote(&status),
            __rd_quote(&__rd_cut(&got))
        );
        let _ = report.write_all(line.as_bytes());
    }
}
