//! Proves that `omniprof report` writes pages that a real browser opens as users would: the
//! reports of the demo's trace, of a PyTorch-written trace and of a four-rank job are loaded
//! in headless Chromium (`--dump-dom`), with no script or console error and no request
//! (the page's Content-Security-Policy refuses any), and their DOM holds the figures
//! `omniprof summary` and `omniprof ranks` print; a screenshot of each view goes to
//! `target/report-screenshots/`. Errors are read twice: from the page's own hook, which
//! writes them into `#errors`, and from Chromium's console log (`--enable-logging=stderr`),
//! where any console message fails the load (the page writes none; a refused request and
//! an uncaught error each log one), so a page whose hook broke cannot pass. The Trace view's
//! "Open in Perfetto UI" button is clicked with `window.open` stood in for: it must hand the
//! chosen file's bytes to `ui.perfetto.dev` by Perfetto's postMessage protocol. Views without
//! data say why; names are shown as text (a `<script>` name does not run); a truncated
//! trace writes no report unless `--partial`, whose report says the trace was cut; the page
//! goes through the shared save path (another user's link in a sticky directory is refused).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use omniprof_test_support::cli::{arg, text, Cli};
use omniprof_test_support::data::{gen_trace, reference_trace};
use omniprof_test_support::skip::{self, Needs};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The views, as the page's `#fragment` names them.
const VIEWS: [&str; 7] = [
    "overview",
    "operators",
    "kernels",
    "memory",
    "distributed",
    "trace",
    "diff",
];

/// The environment variable naming a Chromium binary other than `chromium` on the `PATH`.
const CHROMIUM_ENV: &str = "OMNIPROF_CHROMIUM";

const OMNIPROF: Cli = Cli::new(env!("CARGO_BIN_EXE_omniprof"));

/// The Chromium to use, or `None` after saying the check is skipped.
fn chromium(check: &str) -> Option<PathBuf> {
    let candidate = std::env::var_os(CHROMIUM_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("chromium"));
    match Command::new(&candidate).arg("--version").output() {
        Ok(out) if out.status.success() => Some(candidate),
        _ => {
            skip::skip(
                check,
                Needs::Chromium,
                &format!("{} does not run", candidate.display()),
            );
            None
        }
    }
}

/// Runs headless Chromium on `page` (with `#view` when given) with `mode`
/// (`--dump-dom`, or `--screenshot=PNG`); its standard output, after asserting that the page
/// logged nothing on its console.
fn browse(chromium: &Path, profile: &Path, page: &Path, view: Option<&str>, mode: &str) -> String {
    let url = format!(
        "file://{}{}",
        page.display(),
        view.map(|v| format!("#{v}")).unwrap_or_default()
    );
    let out = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--no-first-run",
            "--window-size=1280,1400",
            "--virtual-time-budget=5000",
            // Every console message, at any level, as a line of standard error.
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(mode)
        .arg(&url)
        .output()
        .expect("run chromium");
    let stderr = text(&out.stderr);
    assert!(
        out.status.success(),
        "chromium {mode} {url} failed: {stderr}"
    );
    let console = console_messages(&stderr);
    assert!(
        console.is_empty(),
        "{url} logged on its console ({mode}):\n{}",
        console.join("\n")
    );
    text(&out.stdout)
}

/// The console messages in Chromium's log: `[…:INFO:CONSOLE:LINE] "message", source: URL`
/// (`CONSOLE(LINE)` in older releases). The log does not say a message's level, so every
/// message counts.
fn console_messages(log: &str) -> Vec<&str> {
    log.lines().filter(|l| l.contains(":CONSOLE")).collect()
}

/// The page's DOM once its script ran, checked free of errors and blocked requests.
fn loaded_dom(chromium: &Path, dir: &Path, page: &Path) -> String {
    let dom = browse(chromium, &dir.join("profile"), page, None, "--dump-dom");
    assert!(
        dom.contains(r#"<body data-ready="true">"#),
        "the page's script did not finish: {}",
        &dom[..dom.len().min(4000)]
    );
    assert!(
        dom.contains(r#"<div id="errors" hidden=""></div>"#),
        "the page recorded errors: {}",
        dom.split(r#"<div id="errors""#)
            .nth(1)
            .map(|s| &s[..s.len().min(2000)])
            .unwrap_or("")
    );
    dom
}

/// A screenshot of each view of `page` under `target/report-screenshots/NAME-VIEW.png`.
fn screenshots(chromium: &Path, dir: &Path, page: &Path, name: &str) {
    let out_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/report-screenshots");
    fs::create_dir_all(&out_dir).expect("create target/report-screenshots");
    for view in VIEWS {
        let png = out_dir.join(format!("{name}-{view}.png"));
        let _ = fs::remove_file(&png);
        browse(
            chromium,
            &dir.join("profile"),
            page,
            Some(view),
            &format!("--screenshot={}", png.display()),
        );
        let bytes = fs::read(&png).unwrap_or_else(|e| panic!("{}: {e}", png.display()));
        assert_eq!(
            &bytes[..8],
            b"\x89PNG\r\n\x1a\n",
            "{} is a PNG",
            png.display()
        );
    }
}

/// `s` as the DOM serializes text: `&`, `<`, `>` escaped.
fn escaped(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('\u{a0}', "&nbsp;")
}

/// The DOM's `table.NAME` element.
fn table<'a>(dom: &'a str, name: &str) -> &'a str {
    let start = dom
        .find(&format!(r#"<table class="{name}">"#))
        .unwrap_or_else(|| panic!("no table {name} in the DOM"));
    let end = dom[start..].find("</table>").expect("a closed table") + start;
    &dom[start..end]
}

/// Every row of `summary --format json` is a row of the Operators table with the same name,
/// calls, and self CPU and device times (3 decimals of microseconds).
fn operators_match_the_summary(dom: &str, trace: &Path) {
    let summary: Value = serde_json::from_str(&OMNIPROF.ok([
        "summary",
        arg(trace),
        "--format",
        "json",
        "--row-limit",
        "-1",
    ]))
    .expect("summary's JSON");
    let rows = summary["rows"].as_array().expect("rows");
    assert!(!rows.is_empty());
    let operators = table(dom, "operators");
    for row in rows {
        let us = |key: &str| format!("{:.3}", row[key].as_f64().expect("a number"));
        let expected = format!(
            r#"<tr><td>{}</td><td class="num">{}</td><td class="num">{}</td><td class="num">{}</td><td class="num">{}</td><td class="num">{}</td>"#,
            escaped(row["name"].as_str().expect("a name")),
            row["count"],
            us("self_cpu_time_total_us"),
            us("cpu_time_total_us"),
            us("cpu_time_avg_us"),
            us("self_device_time_total_us"),
        );
        assert!(
            operators.contains(&expected),
            "the Operators table lacks {expected}"
        );
    }
    assert_eq!(operators.matches("<tr>").count(), rows.len() + 1);
}

#[test]
fn the_vendored_charting_library_is_the_pinned_uplot_release() {
    let dir =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../omniprof-report/src/assets/vendor/uplot");
    for (file, sha256) in [
        (
            "uPlot.iife.min.js",
            "19c8d4c6ad88929a79f4ae49d6f7161566dfd0ba3d15cc495e974f787eb78f1f",
        ),
        (
            "uPlot.min.css",
            "df630c6a8d6f8eeaff264b50f73ce5b114f646ffd9a0bb74f049b0a00135fa04",
        ),
        (
            "LICENSE",
            "8f989229699b4fe2f1a0432d0e9edc338a8a911e250e2d1b01ecd770a5f5b1bd",
        ),
    ] {
        let bytes = fs::read(dir.join(file)).expect("the vendored file");
        let digest: String = Sha256::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(digest, sha256, "{file} differs from uplot 1.6.32's");
    }
}

#[test]
fn the_demo_traces_report_opens_in_chromium_with_the_summarys_figures() {
    let Some(chromium) = chromium("the demo report in Chromium") else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let trace = dir.path().join("demo.json");
    OMNIPROF.ok(["demo", "-o", arg(&trace), "--steps", "8"]);
    let page = dir.path().join("demo.html");
    OMNIPROF.ok(["report", arg(&trace), "-o", arg(&page)]);
    let html = fs::read_to_string(&page).expect("the page");
    // Nothing is loaded from elsewhere: no URL in a src or href, and a policy refusing any.
    assert!(!html.contains("src=\"http") && !html.contains("href=\"http"));
    assert!(html.contains("default-src 'none'"));
    let dom = loaded_dom(&chromium, dir.path(), &page);
    operators_match_the_summary(&dom, &trace);
    // The demo has 8 steps per thread; the step table has a row per ProfilerStep#N.
    let steps = dom.matches("<td>ProfilerStep#").count();
    assert!(steps >= 8, "{steps} step rows");
    assert!(dom.contains("Device utilization (%)"));
    assert!(dom.contains(
        "One rank: the distributed view compares the ranks of a job (give several traces, or \
         a directory of them)."
    ));
    assert!(dom.contains(
        "No base trace: omniprof report --base BASE TRACE compares two traces op by op."
    ));
    // The Trace view: the button for the Perfetto UI, and what to do offline.
    assert!(dom.contains(r#"<button id="open-perfetto">Open in Perfetto UI</button>"#));
    assert!(dom.contains("Without a network (as on many GPU clusters) the Perfetto UI cannot"));
    screenshots(&chromium, dir.path(), &page, "demo");
}

#[test]
fn a_console_message_fails_the_load_even_where_the_pages_own_hook_saw_nothing() {
    let Some(chromium) = chromium("the console check in Chromium") else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    // What the hook checks says all is well; only the console says otherwise.
    let page = dir.path().join("quiet.html");
    fs::write(
        &page,
        r#"<!DOCTYPE html><body data-ready="true"><div id="errors" hidden></div>
<script>console.error("the hook is gone")</script></body>"#,
    )
    .unwrap();
    let failed = std::panic::catch_unwind(|| loaded_dom(&chromium, dir.path(), &page))
        .expect_err("a page that logged an error loaded cleanly");
    let message = failed
        .downcast_ref::<String>()
        .expect("a formatted message");
    assert!(
        message.contains(r#"logged on its console (--dump-dom):"#)
            && message.contains(r#"CONSOLE:2] "the hook is gone""#),
        "{message}"
    );
}

/// Clicks the Trace view's "Open in Perfetto UI" with `window.open` stood in for by a port
/// that records what the page posts to it and answers the first `PING` with `PONG`, as the
/// Perfetto UI does; the browser online or not, and a file chosen (`TRACE_BYTES` as
/// `t.pt.trace.json`). Returns what was opened, what was posted (each `PING` as
/// `["PING", origin]`, the file as `["file", origin, keys, title, fileName, bytes]`) and
/// the status line.
fn click_open_in_perfetto(chromium: &Path, dir: &Path, page: &Path, online: bool) -> Value {
    const HARNESS: &str = r#"<script>
(function () {
  var opened = [], posted = [], ui = new MessageChannel().port1;
  var out = document.createElement("output");
  out.id = "harness";
  document.body.appendChild(out);
  function record() {
    out.textContent = JSON.stringify({
      opened: opened, posted: posted,
      status: document.getElementById("perfetto-status").textContent });
  }
  ui.postMessage = function (message, origin) {
    if (message === "PING") {
      if (!posted.length) setTimeout(function () {
        window.dispatchEvent(new MessageEvent("message", { data: "PONG", source: ui }));
      }, 0);
      posted.push(["PING", origin]);
    } else {
      var p = message.perfetto;
      posted.push(["file", origin, Object.keys(p).join(","), p.title, p.fileName,
                   new TextDecoder().decode(p.buffer)]);
      setTimeout(record, 0);
    }
    record();
  };
  window.open = function (url) { opened.push(url); record(); return ui; };
  Object.defineProperty(navigator, "onLine", { get: function () { return ONLINE; } });
  var chosen = new DataTransfer();
  chosen.items.add(new File([TRACE_BYTES], "t.pt.trace.json"));
  document.getElementById("trace-file").files = chosen.files;
  document.getElementById("open-perfetto").click();
  record();
})();
</script>
</body>"#;
    let html = fs::read_to_string(page).expect("the page");
    let at = html.rfind("</body>").expect("the page ends its body");
    let harness = HARNESS
        .replace("ONLINE", if online { "true" } else { "false" })
        .replace("TRACE_BYTES", r#"'{"traceEvents": []}'"#);
    let clicked = dir.join(format!("clicked-{online}.html"));
    fs::write(
        &clicked,
        format!("{}{harness}{}", &html[..at], &html[at + 7..]),
    )
    .unwrap();
    let dom = loaded_dom(chromium, dir, &clicked);
    let (_, rest) = dom
        .split_once(r#"<output id="harness">"#)
        .expect("the harness ran");
    let recorded = rest.split("</output>").next().unwrap();
    let unescaped = recorded
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    serde_json::from_str(&unescaped).unwrap_or_else(|e| panic!("{e}: {unescaped}"))
}

#[test]
fn open_in_perfetto_hands_the_chosen_file_to_the_perfetto_ui_by_its_postmessage_protocol() {
    let Some(chromium) = chromium("the report's Perfetto button in Chromium") else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let page = dir.path().join("pytorch.html");
    OMNIPROF.ok(["report", arg(&reference_trace()), "-o", arg(&page)]);

    let online = click_open_in_perfetto(&chromium, dir.path(), &page, true);
    let ui = "https://ui.perfetto.dev";
    assert_eq!(online["opened"], serde_json::json!([ui]));
    let posted = online["posted"].as_array().unwrap();
    // PING until the UI answers, then the file, all to the UI's origin only.
    assert_eq!(posted.first(), Some(&serde_json::json!(["PING", ui])));
    assert!(posted[..posted.len() - 1]
        .iter()
        .all(|p| *p == serde_json::json!(["PING", ui])));
    assert_eq!(
        posted.last(),
        Some(&serde_json::json!([
            "file",
            ui,
            "buffer,title,fileName",
            "t.pt.trace.json",
            "t.pt.trace.json",
            r#"{"traceEvents": []}"#
        ]))
    );
    assert_eq!(online["status"], "Sent t.pt.trace.json to the Perfetto UI.");

    // Offline, nothing is opened and the page says where to read on.
    let offline = click_open_in_perfetto(&chromium, dir.path(), &page, false);
    assert_eq!(
        offline,
        serde_json::json!({
            "opened": [],
            "posted": [],
            "status": "The browser is offline: see below."
        })
    );
}

#[test]
fn a_pytorch_traces_report_shows_its_rows_and_says_why_views_are_empty() {
    let Some(chromium) = chromium("the PyTorch trace's report in Chromium") else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let trace = reference_trace();
    let page = dir.path().join("pytorch.html");
    OMNIPROF.ok(["report", arg(&trace), "-o", arg(&page)]);
    let dom = loaded_dom(&chromium, dir.path(), &page);
    operators_match_the_summary(&dom, &trace);
    for why in [
        "No device utilization: the trace has no device rows (no kernels, copies or fills).",
        "The trace has no device rows: no kernels ran (or the backend recorded none).",
        "The trace has no memory events ([memory] records: PyTorch writes them with \
         profile_memory=True).",
        "One rank: the distributed view compares the ranks of a job",
        "whole trace (no ProfilerStep#N)",
    ] {
        assert!(dom.contains(&escaped(why)), "the DOM lacks {why:?}");
    }
    screenshots(&chromium, dir.path(), &page, "pytorch");
}

/// `gen_trace.py --rank` into `dir/rank<R>.json`.
fn rank(dir: &Path, rank: u32, extra: &[&str]) {
    let r = rank.to_string();
    let mut args = vec!["--ops", "2000", "--threads", "2", "--world-size", "4"];
    args.extend(["--rank", &r, "--steps", "4"]);
    args.extend(extra);
    gen_trace(&dir.join(format!("rank{rank}.json")), &args);
}

#[test]
fn a_jobs_report_shows_each_ranks_steps_and_marks_the_slowest() {
    let Some(chromium) = chromium("the job's report in Chromium") else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let job = dir.path().join("job");
    fs::create_dir(&job).expect("job dir");
    for r in 0..4 {
        let slow: &[&str] = if r == 2 {
            &["--slow-steps", "1,3", "--slow-ms", "4"]
        } else {
            &[]
        };
        rank(&job, r, slow);
    }
    let page = dir.path().join("job.html");
    OMNIPROF.ok(["report", arg(&job), "-o", arg(&page)]);
    let dom = loaded_dom(&chromium, dir.path(), &page);
    let ranks: Value =
        serde_json::from_str(&OMNIPROF.ok(["ranks", arg(&job), "--format", "json"])).expect("JSON");
    let straggler = &ranks["straggler"];
    assert_eq!(straggler["rank"], 2);
    assert!(dom.contains(&format!(
        "Slowest rank: rank 2 (the most time outside communication), slowest in {} of {} steps, \
         {:.3}us behind the median on average.",
        straggler["slowest_in"],
        straggler["steps"],
        straggler["mean_lag_ns"].as_i64().expect("ns") as f64 / 1000.0
    )));
    for step in ranks["steps"].as_array().expect("steps") {
        let slowest = step["slowest"].as_u64().map(|i| i as usize);
        for (i, d) in step["durations_ns"]
            .as_array()
            .expect("durations")
            .iter()
            .enumerate()
        {
            let mut cell = format!("{:.3}", d.as_i64().expect("ns") as f64 / 1000.0);
            if slowest == Some(i) {
                cell.push_str(" (slowest outside comm.)");
            }
            assert!(
                dom.contains(&format!(r#"<td class="num">{cell}</td>"#)),
                "no cell {cell}"
            );
        }
    }
    assert!(dom.contains(&format!(
        "The steps below are those of {} (the lowest rank)",
        job.join("rank0.json").display()
    )));
    // The job's operators are the rows summed over the ranks, as `summary DIR` prints them.
    operators_match_the_summary(&dom, &job);
    screenshots(&chromium, dir.path(), &page, "job");
}

/// A host-only trace with one op of each of these names.
fn trace_named(names: &[&str]) -> String {
    let events: Vec<String> = names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            serde_json::json!({
                "ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1,
                "ts": 100 + 10 * i, "dur": 5, "args": {"External id": i + 1}
            })
            .to_string()
        })
        .collect();
    format!(
        r#"{{"schemaVersion": 1, "traceEvents": [{}], "baseTimeNanoseconds": 0}}"#,
        events.join(",\n")
    )
}

#[test]
fn names_with_markup_are_shown_as_text_and_never_run() {
    let Some(chromium) = chromium("the report of names with markup in Chromium") else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let names = [
        "<script>alert(1)</script>",
        "<script>document.body.setAttribute('data-ran', 'script')</script>",
        "<img src=x onerror=\"document.body.setAttribute('data-ran', 'img')\">",
        "a & b \"quoted\" 'single'",
    ];
    let trace = dir.path().join("names.json");
    fs::write(&trace, trace_named(&names)).expect("write the trace");
    let page = dir.path().join("names.html");
    OMNIPROF.ok(["report", arg(&trace), "-o", arg(&page)]);
    let dom = loaded_dom(&chromium, dir.path(), &page);
    assert!(!dom.contains("data-ran=\""), "a name ran as markup");
    for name in names {
        assert!(
            dom.contains(&format!("<td>{}</td>", escaped(name))),
            "{name} is not shown as text"
        );
    }
    operators_match_the_summary(&dom, &trace);
}

/// Averages just off halfway at the third decimal (570.6665 µs is held as a double a hair
/// above it) print as `summary` prints them, by their exact value; one exactly halfway
/// (0.0625 µs, an odd number of sixteenths) rounds to the even digit, as Rust's does.
#[test]
fn figures_near_and_at_halfway_print_as_summary_prints_them() {
    let Some(chromium) = chromium("the report of near-halfway figures in Chromium") else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    // Two calls of 570.666 and 570.667 µs (the average 570.6665 by its float sum), and two
    // of 0.0625 µs (62.5 ns: read as 62 and 63 ns, whose average is 0.0625 µs exactly).
    let events = [
        ("near_half", 100.0, 570.666),
        ("near_half", 688.760, 570.667),
        ("exact_half", 2000.0, 0.062),
        ("exact_half", 3000.0, 0.063),
    ];
    let events: Vec<String> = events
        .iter()
        .enumerate()
        .map(|(i, (name, ts, dur))| {
            serde_json::json!({
                "ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1,
                "ts": ts, "dur": dur, "args": {"External id": i + 1}
            })
            .to_string()
        })
        .collect();
    let trace = dir.path().join("halves.json");
    let text = format!(
        r#"{{"schemaVersion": 1, "traceEvents": [{}], "baseTimeNanoseconds": 0}}"#,
        events.join(",\n")
    );
    fs::write(&trace, text).expect("write the trace");
    let page = dir.path().join("halves.html");
    OMNIPROF.ok(["report", arg(&trace), "-o", arg(&page)]);
    let dom = loaded_dom(&chromium, dir.path(), &page);
    operators_match_the_summary(&dom, &trace);
    let operators = table(&dom, "operators");
    assert!(
        operators.contains(r#"<td class="num">570.667</td>"#),
        "{operators}"
    );
    assert!(
        operators.contains(r#"<td>exact_half</td><td class="num">2</td><td class="num">0.125</td><td class="num">0.125</td><td class="num">0.062</td>"#),
        "{operators}"
    );
}

#[cfg(unix)]
#[test]
fn another_users_link_at_the_page_in_a_sticky_directory_is_refused_and_its_target_kept() {
    use omniprof_test_support::shared_dirs::{give_to, make_sticky, other_owner};
    let Some(other) = other_owner("report to another user's link") else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let trace = dir.path().join("t.json");
    fs::write(&trace, trace_named(&["aten::mm"])).expect("write the trace");
    let victim = dir.path().join("secret");
    fs::write(&victim, "kept").expect("write the victim");
    let shared = tempfile::tempdir().expect("temp dir");
    make_sticky(shared.path());
    let page = shared.path().join("x.html");
    std::os::unix::fs::symlink(&victim, &page).expect("plant the link");
    give_to(&page, other);

    let stderr = OMNIPROF.fails(1, ["report", arg(&trace), "-o", arg(&page)]);

    assert_eq!(
        stderr,
        format!(
            "error: cannot write {page}: {page} is a symbolic link of uid {other} in the sticky \
             world-writable directory {shared} (owned by uid 0), and this process runs as uid \
             0: it is not followed, as the kernel's fs.protected_symlinks would refuse; remove \
             it or save elsewhere\n",
            page = page.display(),
            shared = shared.path().display()
        )
    );
    assert_eq!(fs::read_to_string(&victim).expect("the victim"), "kept");
    assert!(fs::symlink_metadata(&page)
        .expect("the link")
        .file_type()
        .is_symlink());
}

#[test]
fn a_truncated_trace_writes_no_report_and_with_partial_one_that_says_it_was_cut() {
    let dir = tempfile::tempdir().expect("temp dir");
    let whole = trace_named(&["aten::mm", "aten::add", "aten::relu"]);
    let cut = &whole[..whole.find("aten::relu").expect("the last op")];
    let trace = dir.path().join("cut.json");
    fs::write(&trace, cut).expect("write the trace");
    let page = dir.path().join("cut.html");
    let stderr = OMNIPROF.fails(1, ["report", arg(&trace), "-o", arg(&page)]);
    assert!(
        stderr.contains(&format!("{}: ", trace.display())) && stderr.contains("(byte "),
        "the error names the file and offset: {stderr}"
    );
    assert!(stderr.contains("no report written"), "{stderr}");
    assert!(
        !page.exists(),
        "a report was written of a trace that failed"
    );

    OMNIPROF.fails(1, ["report", arg(&trace), "-o", arg(&page), "--partial"]);
    let html = fs::read_to_string(&page).expect("--partial writes the report");
    assert!(html.contains(r#""name":"aten::mm""#));
    let Some(chromium) = chromium("the cut trace's report in Chromium") else {
        return;
    };
    let dom = loaded_dom(&chromium, dir.path(), &page);
    let overview = &dom[dom.find(r#"id="view-overview""#).expect("overview")..];
    assert!(
        overview.contains(&format!(
            "This trace was cut: {} was read only up to an error",
            trace.display()
        )),
        "the first view does not say the trace was cut"
    );
}

#[test]
fn a_report_with_a_base_shows_the_diff_of_the_two_traces() {
    let Some(chromium) = chromium("the diff report in Chromium") else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let base = dir.path().join("base.json");
    let new = dir.path().join("new.json");
    fs::write(&base, trace_named(&["aten::mm", "aten::add"])).expect("base");
    fs::write(&new, trace_named(&["aten::mm", "aten::mm", "aten::relu"])).expect("new");
    let page = dir.path().join("diff.html");
    OMNIPROF.ok(["report", arg(&new), "--base", arg(&base), "-o", arg(&page)]);
    let dom = loaded_dom(&chromium, dir.path(), &page);
    let diff = table(&dom, "diff");
    // aten::mm: 1 call in the base, 2 now; aten::add gone; aten::relu new.
    assert!(diff.contains(r#"<td>aten::mm</td><td>both</td><td class="num">1</td><td class="num">2</td><td class="num">1</td>"#), "{diff}");
    assert!(
        diff.contains("<td>aten::add</td><td>vanished</td>"),
        "{diff}"
    );
    assert!(diff.contains("<td>aten::relu</td><td>new</td>"), "{diff}");
}

#[test]
fn a_trace_with_memory_records_shows_each_devices_curve_and_peaks() {
    let Some(chromium) = chromium("the memory report in Chromium") else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let mut events = vec![serde_json::json!({
        "ph": "X", "cat": "cpu_op", "name": "aten::empty", "pid": 1, "tid": 1,
        "ts": 100, "dur": 50, "args": {"External id": 1}
    })];
    for (i, (bytes, allocated)) in [(1024i64, 1024i64), (2048, 3072), (-1024, 2048)]
        .iter()
        .enumerate()
    {
        events.push(serde_json::json!({
            "ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1,
            "tid": 1, "ts": 110 + 10 * i,
            "args": {"Device Type": 1, "Device Id": 0, "Addr": 4096 + i, "Bytes": bytes,
                     "Total Allocated": allocated, "Total Reserved": 8192}
        }));
    }
    let trace = dir.path().join("memory.json");
    let text = format!(
        r#"{{"schemaVersion": 1, "traceEvents": {}, "baseTimeNanoseconds": 0}}"#,
        serde_json::Value::from(events)
    );
    fs::write(&trace, text).expect("write the trace");
    let page = dir.path().join("memory.html");
    OMNIPROF.ok(["report", arg(&trace), "-o", arg(&page)]);
    let dom = loaded_dom(&chromium, dir.path(), &page);
    assert!(
        dom.contains("device 0 (type 1): peak allocated 3072 B, peak reserved 8192 B, 3 records"),
        "no peaks in the Memory view"
    );
    assert!(dom.contains("device 0 (type 1): memory (MiB) over time (ms)"));
    // aten::empty holds the three records: 2048 bytes of device memory, as summary says.
    let summary: Value =
        serde_json::from_str(&OMNIPROF.ok(["summary", arg(&trace), "--format", "json"]))
            .expect("JSON");
    assert_eq!(summary["rows"][0]["self_device_memory_usage"], 2048);
    assert!(dom.contains(
        r#"<tr><td>aten::empty</td><td class="num">2048</td><td class="num">0</td><td class="num">1</td></tr>"#
    ));
}

/// The model a page holds.
fn model_of(page: &Path) -> Value {
    let html = fs::read_to_string(page).expect("the page");
    let start = html
        .find(r#"<script type="application/json" id="model">"#)
        .expect("a model")
        + r#"<script type="application/json" id="model">"#.len();
    let end = html[start..].find("</script>").expect("closed") + start;
    serde_json::from_str(&html[start..end]).expect("the model is JSON")
}

#[test]
fn kernel_metrics_read_again_with_every_arg_equal_summarys() {
    let dir = tempfile::tempdir().expect("temp dir");
    let trace = dir.path().join("scope.json");
    // Two kernels whose `flops` and `occupancy` args are metrics (the scope profiler's
    // counter series name them), and a CUPTI range whose numeric args all are.
    fs::write(
        &trace,
        r#"{"schemaVersion": 1, "baseTimeNanoseconds": 0, "traceEvents": [
  {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 10, "dur": 4,
   "args": {"device": 0, "stream": 7, "flops": 100, "occupancy": 0.5}},
  {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 20, "dur": 6,
   "args": {"device": 0, "stream": 7, "flops": 300, "occupancy": 0.25}},
  {"ph": "X", "cat": "cuda_profiler_range", "name": "range", "pid": 0, "tid": 7, "ts": 30,
   "dur": 2, "args": {"sm__cycles": 42}},
  {"ph": "C", "cat": "xpu_scope_profiler", "name": "work", "pid": 0, "tid": 7, "ts": 10,
   "args": {"flops": 100, "occupancy": 0.5}}
]}"#,
    )
    .expect("write the trace");
    let page = dir.path().join("scope.html");
    OMNIPROF.ok(["report", arg(&trace), "-o", arg(&page)]);
    let summary: Value = serde_json::from_str(&OMNIPROF.ok([
        "summary",
        arg(&trace),
        "--metrics",
        "--format",
        "json",
    ]))
    .expect("JSON");
    let model = model_of(&page);
    assert_eq!(model["kernel_metrics"], summary);
    assert_eq!(
        model["kernel_metrics"]["kernels"][0]["metrics"][1]["max"], 0.5,
        "gemm's occupancy"
    );
    assert_eq!(model["kernels"][0]["name"], "gemm");
    assert_eq!(
        (
            &model["kernels"][0]["calls"],
            &model["kernels"][0]["min_ns"],
            &model["kernels"][0]["max_ns"]
        ),
        (&Value::from(2), &Value::from(4000), &Value::from(6000))
    );
}

#[test]
fn operators_group_by_stack_as_summary_does() {
    let dir = tempfile::tempdir().expect("temp dir");
    let trace = omniprof_test_support::data::stack_trace();
    let page = dir.path().join("stacks.html");
    OMNIPROF.ok([
        "report",
        arg(&trace),
        "-o",
        arg(&page),
        "--group-by-stack",
        "5",
    ]);
    let summary: Value = serde_json::from_str(&OMNIPROF.ok([
        "summary",
        arg(&trace),
        "--group-by-stack",
        "5",
        "--format",
        "json",
        "--row-limit",
        "-1",
    ]))
    .expect("JSON");
    let model = model_of(&page);
    assert_eq!(model["operators"], summary);
    assert!(model["operators"]["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .any(|r| !r["stack"].as_array().expect("a stack").is_empty()));
}

#[test]
fn the_overviews_step_split_is_what_summary_steps_prints() {
    let dir = tempfile::tempdir().expect("temp dir");
    let trace = dir.path().join("demo.json");
    OMNIPROF.ok(["demo", "-o", arg(&trace)]);
    let page = dir.path().join("demo.html");
    OMNIPROF.ok(["report", arg(&trace), "-o", arg(&page)]);
    let printed: Value =
        serde_json::from_str(&OMNIPROF.ok(["summary", arg(&trace), "--steps", "--format", "json"]))
            .expect("JSON");
    let steps = printed["steps"].as_array().expect("steps");
    // The demo's 40 steps, each split into parts that add up to it.
    assert_eq!(steps.len(), 40);
    for s in steps {
        let parts: i64 = [
            "kernel_ns",
            "memcpy_ns",
            "memset_ns",
            "communication_ns",
            "runtime_ns",
            "cpu_only_ns",
            "idle_ns",
        ]
        .iter()
        .map(|k| s[k].as_i64().expect("ns"))
        .sum();
        assert_eq!(
            parts,
            s["end_ns"].as_i64().unwrap() - s["start_ns"].as_i64().unwrap()
        );
    }
    assert_eq!(model_of(&page)["steps"], printed);
}

/// A host-only trace claiming `rank`, with `ProfilerStep#N` of each of `steps` (N × 100 µs
/// in, 40 µs long, one 10 µs op inside).
fn cycle_trace(rank: u64, steps: &[u64]) -> String {
    let mut events = Vec::new();
    for &n in steps {
        let ts = 100 * n;
        events.push(serde_json::json!({
            "ph": "X", "cat": "user_annotation", "name": format!("ProfilerStep#{n}"),
            "pid": 1, "tid": 1, "ts": ts, "dur": 40
        }));
        events.push(serde_json::json!({
            "ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1,
            "ts": ts + 5, "dur": 10
        }));
    }
    serde_json::json!({
        "schemaVersion": 1, "traceEvents": events, "baseTimeNanoseconds": 0,
        "distributedInfo": {"rank": rank, "world_size": 2, "backend": "gloo"}
    })
    .to_string()
}

#[test]
fn the_step_view_shows_every_step_of_the_first_ranks_traces() {
    // A trace handler's directory of a default-schedule job: rank 0 wrote one trace per
    // cycle, rank 1 one trace.
    let dir = tempfile::tempdir().expect("temp dir");
    let job = dir.path().join("tb");
    fs::create_dir(&job).expect("job dir");
    let cycles = [
        (0, "a", &[2u64, 3][..]),
        (0, "b", &[6, 7]),
        (0, "c", &[10]),
        (1, "d", &[2, 3, 6]),
    ];
    for (rank, name, steps) in cycles {
        fs::write(
            job.join(format!("{name}.pt.trace.json")),
            cycle_trace(rank, steps),
        )
        .expect("trace");
    }
    let page = dir.path().join("tb.html");
    let out = OMNIPROF.run(["report", arg(&job), "-o", arg(&page)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let steps = model_of(&page)["steps"]["steps"].clone();
    let numbers: Vec<u64> = steps
        .as_array()
        .expect("steps")
        .iter()
        .map(|s| s["number"].as_u64().expect("a number"))
        .collect();
    assert_eq!(numbers, [2, 3, 6, 7, 10]);
    // Each step split as `summary --steps` splits it in its own trace.
    for (i, name) in [(0, "a"), (2, "b"), (4, "c")] {
        let printed: Value = serde_json::from_str(&OMNIPROF.ok([
            "summary",
            arg(&job.join(format!("{name}.pt.trace.json"))),
            "--steps",
            "--format",
            "json",
        ]))
        .expect("JSON");
        assert_eq!(steps[i], printed["steps"][0]);
    }
}

/// A trace of `ops` host ops named `op0`, `op1`…, op i taking i + 1 µs (the last the
/// longest), one after another, then as many 1 µs kernels named `k0`, `k1`….
fn trace_of_distinct_names(ops: usize) -> String {
    let mut events = Vec::new();
    for i in 0..ops {
        events.push(serde_json::json!({
            "ph": "X", "cat": "cpu_op", "name": format!("op{i}"), "pid": 1, "tid": 1,
            "ts": i * (ops + 1), "dur": i + 1, "args": {"External id": i + 1}
        }));
    }
    let after = ops * (ops + 1) + 1000;
    for i in 0..ops {
        events.push(serde_json::json!({
            "ph": "X", "cat": "kernel", "name": format!("k{i}"), "pid": 0, "tid": 7,
            "ts": after + 10 * i, "dur": 1, "args": {"device": 0, "stream": 7}
        }));
    }
    format!(
        r#"{{"schemaVersion": 1, "traceEvents": {}, "baseTimeNanoseconds": 0}}"#,
        Value::from(events)
    )
}

#[test]
fn a_trace_of_5000_distinct_names_embeds_1000_rows_per_table_and_counts_the_rest() {
    let dir = tempfile::tempdir().expect("temp dir");
    let trace = dir.path().join("names.json");
    fs::write(&trace, trace_of_distinct_names(5000)).expect("write the trace");
    let base = dir.path().join("base.json");
    fs::write(&base, trace_named(&["op0"])).expect("write the base");
    let page = dir.path().join("names.html");
    OMNIPROF.ok([
        "report",
        arg(&trace),
        "--base",
        arg(&base),
        "-o",
        arg(&page),
    ]);
    let model = model_of(&page);
    let names = |rows: &Value| -> Vec<String> {
        rows.as_array()
            .expect("rows")
            .iter()
            .map(|r| r["name"].as_str().expect("a name").to_owned())
            .collect()
    };
    // 10,000 key-averages rows (5,000 ops, 5,000 kernels): the 1,000 with the most self
    // time (op4000…op4999), in the order of first events.
    let operators = names(&model["operators"]["rows"]);
    assert_eq!(operators.len(), 1000);
    assert_eq!(
        operators,
        (4000..5000).map(|i| format!("op{i}")).collect::<Vec<_>>()
    );
    // The totals are of every row, as `summary` prints them: 1 + 2 + … + 5000 µs of host
    // time, 5,000 µs of kernels.
    let summary: Value =
        serde_json::from_str(&OMNIPROF.ok(["summary", arg(&trace), "--format", "json"]))
            .expect("JSON");
    assert_eq!(model["operators"]["self_cpu_time_total_us"], 12_502_500.0);
    assert_eq!(model["operators"]["self_device_time_total_us"], 5_000.0);
    for total in ["self_cpu_time_total_us", "self_device_time_total_us"] {
        assert_eq!(model["operators"][total], summary[total], "{total}");
    }
    // 5,000 kernels of one time each: the first 1,000 called.
    let kernels = names(&model["kernels"]);
    assert_eq!(
        kernels,
        (0..1000).map(|i| format!("k{i}")).collect::<Vec<_>>()
    );
    // The diff's 10,000 rows (op0 in both, the rest new): the largest regressions first.
    let diff = names(&model["diff"]["rows"]);
    assert_eq!(diff.len(), 1000);
    assert_eq!(diff[0], "op4999");
    assert_eq!(
        model["left_out"],
        serde_json::json!({"operators": 9000, "kernels": 4000, "metrics": 0, "counters": 0,
            "counter_charts": 0, "diff": 9000})
    );
    // About 0.9 MB: 3,000 rows of the 25,000, the script and the charting library.
    let size = fs::metadata(&page).expect("the page").len();
    assert!(size < 1_200_000, "the page is {size} bytes");
    let Some(chromium) = chromium("the notes of the rows left out in Chromium") else {
        return;
    };
    let dom = loaded_dom(&chromium, dir.path(), &page);
    assert_eq!(table(&dom, "operators").matches("<tr>").count(), 1 + 1000);
    for note in [
        "The page holds the 1000 rows with the most self CPU plus self CUDA time (the totals \
         above are of every row; omniprof summary --row-limit -1 prints them all); 9000 more \
         rows are left out of it.",
        "The page holds the 1000 kernels with the most total time; 4000 more rows are left out \
         of it.",
        "The page holds the 1000 largest regressions (omniprof diff prints every row); 9000 \
         more rows are left out of it.",
    ] {
        assert!(dom.contains(note), "no note: {note}");
    }
}

#[test]
fn metrics_and_counters_past_the_limits_embed_1000_rows_and_100_charts_and_count_the_rest() {
    let dir = tempfile::tempdir().expect("temp dir");
    let trace = dir.path().join("metrics.json");
    let mut events = Vec::new();
    // 1,100 profiler ranges with one metric each, longer as they go: 1,100 metric rows.
    for i in 0..1100 {
        events.push(serde_json::json!({
            "ph": "X", "cat": "cuda_profiler_range", "name": format!("r{i}"), "pid": 0,
            "tid": 7, "ts": 10_000 * i, "dur": i + 1, "args": {"flops": i}
        }));
    }
    // 1,100 counters with one value each: two samples for the last 50, one for the others.
    for i in 0..1100 {
        for ts in [1, 2].into_iter().take(if i >= 1050 { 2 } else { 1 }) {
            events.push(serde_json::json!({
                "ph": "C", "cat": "gpu_pm_counter", "name": format!("c{i}"), "pid": 0,
                "tid": 0, "ts": ts, "args": {"v": i}
            }));
        }
    }
    fs::write(
        &trace,
        format!(
            r#"{{"schemaVersion": 1, "traceEvents": {}, "baseTimeNanoseconds": 0}}"#,
            Value::from(events)
        ),
    )
    .expect("write the trace");
    let page = dir.path().join("metrics.html");
    OMNIPROF.ok(["report", arg(&trace), "-o", arg(&page)]);
    let model = model_of(&page);
    // The 1,000 longest ranges, in their order.
    let kernels: Vec<&str> = model["kernel_metrics"]["kernels"]
        .as_array()
        .expect("kernels")
        .iter()
        .map(|k| k["name"].as_str().expect("a name"))
        .collect();
    let longest: Vec<String> = (100..1100).map(|i| format!("r{i}")).collect();
    assert_eq!(kernels, longest);
    assert_eq!(model["counters"].as_array().expect("rows").len(), 1000);
    // The 100 charts: the 50 values of two samples, then the first 50 of one.
    let mut charted: Vec<String> = model["counter_lines"]
        .as_array()
        .expect("lines")
        .iter()
        .map(|l| l["counter"].as_str().expect("a counter").to_owned())
        .collect();
    charted.sort_by_key(|c| c[1..].parse::<u32>().expect("a number"));
    let expected: Vec<String> = (0..50).chain(1050..1100).map(|i| format!("c{i}")).collect();
    assert_eq!(charted, expected);
    assert_eq!(
        model["left_out"],
        serde_json::json!({"operators": 100, "kernels": 0, "metrics": 100, "counters": 100,
            "counter_charts": 1000, "diff": 0})
    );
    let Some(chromium) = chromium("the notes of the metrics and counters left out in Chromium")
    else {
        return;
    };
    let dom = loaded_dom(&chromium, dir.path(), &page);
    for note in [
        "The page holds the 1000 rows of the kernels with the most device time (omniprof \
         summary --metrics prints them all); 100 more rows are left out of it.",
        "The page holds the first 1000 (omniprof summary --counters prints them all); 100 \
         more rows are left out of it.",
        "The page charts the 100 counter values with the most samples; 1000 more are not \
         charted.",
    ] {
        assert!(dom.contains(note), "no note: {note}");
    }
}

#[test]
fn kernels_and_ranges_near_i64_max_long_saturate_their_totals() {
    let dir = tempfile::tempdir().expect("temp dir");
    let trace = dir.path().join("long.json");
    // Two kernels and two profiler ranges of 8e18 ns each: their sums pass i64::MAX.
    let mut events = Vec::new();
    for (cat, name) in [("kernel", "k"), ("cuda_profiler_range", "r")] {
        for i in 0..2 {
            events.push(serde_json::json!({
                "ph": "X", "cat": cat, "name": name, "pid": 0, "tid": 7, "ts": i,
                "dur": 8_000_000_000_000_000_i64, "args": {"device": 0, "stream": 7, "flops": 1}
            }));
        }
    }
    fs::write(
        &trace,
        serde_json::json!({ "traceEvents": events }).to_string(),
    )
    .expect("write the trace");
    let page = dir.path().join("long.html");
    OMNIPROF.ok(["report", arg(&trace), "-o", arg(&page)]);
    let model = model_of(&page);
    assert_eq!(model["kernels"][0]["total_ns"], i64::MAX);
    assert_eq!(
        model["kernel_metrics"]["kernels"][0]["device_time_us"],
        i64::MAX as f64 / 1000.0
    );
}
