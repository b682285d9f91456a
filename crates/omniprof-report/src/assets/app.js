// omniprof report: lays out the model that `omniprof report` computed (the JSON in
// #model) as views. Every figure comes from the model; this script only formats, sorts,
// filters and draws. Every name is inserted with textContent, never as HTML.
(function () {
  "use strict";
  var model = JSON.parse(document.getElementById("model").textContent);
  var VIEWS = [
    ["overview", "Overview"],
    ["operators", "Operators"],
    ["kernels", "Kernels"],
    ["memory", "Memory"],
    ["distributed", "Distributed"],
    ["trace", "Trace"],
    ["diff", "Diff"]
  ];
  var PARTS = [
    ["kernel_ns", "Kernel", "#4e79a7"],
    ["memcpy_ns", "Memcpy", "#f28e2b"],
    ["memset_ns", "Memset", "#edc948"],
    ["communication_ns", "Communication", "#e15759"],
    ["runtime_ns", "Runtime", "#76b7b2"],
    ["cpu_only_ns", "CPU only", "#59a14f"],
    ["idle_ns", "Idle", "#bab0ac"]
  ];

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      node.setAttribute(k, attrs[k]);
    });
    (children || []).forEach(function (c) {
      node.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
    });
    return node;
  }
  function text(tag, value, attrs) {
    var node = el(tag, attrs);
    node.textContent = value;
    return node;
  }
  // Three decimals as the CLI prints them: a value exactly halfway rounds to the even last
  // digit (Rust's and Python's formatting), where toFixed would round it up. Both round
  // every other value by its exact binary value. A double is exactly halfway only when it
  // is an odd number of sixteenths (k + 1/2 thousandths needs the 125 of 1000 to cancel),
  // which v * 16 tells exactly; v * 2000 is rounded, and took values just off halfway
  // (890.2995 held as 890.29949...) for halves.
  function fixed3(v) {
    if (v === null || v === undefined) return "";
    v = Number(v);
    var sixteenths = v * 16;
    if (Number.isInteger(sixteenths) && sixteenths % 2 !== 0) {
      var below = Math.floor(v * 1000);
      return ((below % 2 === 0 ? below : below + 1) / 1000).toFixed(3);
    }
    return v.toFixed(3);
  }
  function nsAsUs(v) {
    return v === null || v === undefined ? "" : fixed3(v / 1000);
  }
  function plain(v) {
    return v === null || v === undefined ? "" : String(v);
  }
  function empty(section, why) {
    section.appendChild(text("p", why, { "class": "empty" }));
  }
  // A long table holds some rows (MAX_TABLE_ROWS in the model's crate); says how many more
  // the model left out, and which were kept.
  function leftOut(section, count, kept) {
    if (!count) return;
    section.appendChild(text("p", "The page holds " + kept + "; " + count +
      " more rows are left out of it.", { "class": "left-out" }));
  }

  // A table whose columns sort on a click on their header, with a search box over the
  // first column when `search` is set.
  function table(columns, rows, options) {
    options = options || {};
    var wrap = el("div", { "class": "table" });
    var body = el("tbody");
    var order = rows.slice();
    var sortKey = null;
    var descending = true;
    var filter = "";
    function render() {
      body.textContent = "";
      order.forEach(function (row) {
        var first = String(row[columns[0].key]).toLowerCase();
        if (filter && first.indexOf(filter) < 0) return;
        var tr = el("tr", options.rowClass ? { "class": options.rowClass(row) } : {});
        columns.forEach(function (c) {
          var td = text("td", (c.format || plain)(row[c.key], row));
          if (c.numeric) td.className = "num";
          tr.appendChild(td);
        });
        body.appendChild(tr);
      });
    }
    var head = el("tr");
    columns.forEach(function (c) {
      var th = text("th", c.label, { "data-key": c.key });
      th.addEventListener("click", function () {
        descending = sortKey === c.key ? !descending : true;
        sortKey = c.key;
        var value = c.sortValue || function (r) { return r[c.key]; };
        order.sort(function (a, b) {
          var x = value(a), y = value(b);
          var cmp = typeof x === "number" && typeof y === "number"
            ? x - y : String(x).localeCompare(String(y));
          return descending ? -cmp : cmp;
        });
        render();
      });
      head.appendChild(th);
    });
    if (options.search) {
      var input = el("input", { type: "search", placeholder: "Search " + columns[0].label.toLowerCase() });
      input.addEventListener("input", function () {
        filter = input.value.toLowerCase();
        render();
      });
      wrap.appendChild(input);
    }
    wrap.appendChild(el("table", { "class": options.id ? options.id : "" }, [el("thead", {}, [head]), body]));
    render();
    return wrap;
  }

  function chart(section, title, opts, data) {
    var box = el("div", { "class": "chart" });
    section.appendChild(text("h3", title));
    section.appendChild(box);
    opts.width = Math.max(480, Math.min(1100, document.documentElement.clientWidth - 80));
    opts.height = opts.height || 300;
    new uPlot(opts, data, box);
  }

  function keyAverageColumns(doc) {
    var columns = [{ key: "name", label: "Name" }];
    var rows = doc.rows;
    if (rows.some(function (r) { return r.input_shapes !== undefined; })) {
      columns.push({ key: "input_shapes", label: "Input Shapes" });
    }
    if (rows.some(function (r) { return r.stack !== undefined; })) {
      columns.push({ key: "stack", label: "Source Location", format: function (s) { return (s || []).join(" | "); } });
    }
    columns.push(
      { key: "count", label: "# of Calls", numeric: true },
      { key: "self_cpu_time_total_us", label: "Self CPU (us)", numeric: true, format: fixed3 },
      { key: "cpu_time_total_us", label: "CPU total (us)", numeric: true, format: fixed3 },
      { key: "cpu_time_avg_us", label: "CPU time avg (us)", numeric: true, format: fixed3 },
      { key: "self_device_time_total_us", label: "Self " + doc.device + " (us)", numeric: true, format: fixed3 },
      { key: "device_time_total_us", label: doc.device + " total (us)", numeric: true, format: fixed3 },
      { key: "device_time_avg_us", label: doc.device + " time avg (us)", numeric: true, format: fixed3 }
    );
    if (doc.profile_memory) {
      columns.push(
        { key: "self_cpu_memory_usage", label: "Self CPU Mem (B)", numeric: true },
        { key: "self_device_memory_usage", label: "Self " + doc.device + " Mem (B)", numeric: true }
      );
    }
    return columns;
  }

  var build = {
    overview: function (s) {
      var cut = model.traces.filter(function (t) { return t.error; });
      cut.forEach(function (t) {
        s.appendChild(text("p", "This trace was cut: " + t.label + " was read only up to an error (" +
          t.error + "); its figures are of what was read before.", { "class": "partial" }));
      });
      s.appendChild(table([
        { key: "label", label: "Trace" },
        { key: "rank", label: "Rank", numeric: true },
        { key: "events", label: "Items read", numeric: true }
      ], model.traces));
      var steps = model.steps.steps;
      if (model.traces.length > 1) {
        // Every trace of the lowest rank gives its steps (the model joins them).
        var first = model.traces[0];
        var own = model.traces.filter(function (t) { return first.rank !== null && t.rank === first.rank; });
        var labels = own.length ? own.map(function (t) { return t.label; }).join(" + ") : first.label;
        s.appendChild(text("p", "The steps below are those of " + labels +
          " (the lowest rank); the Distributed view compares every rank's steps, and the top ops " +
          "and kernels are summed over the ranks."));
      }
      if (!steps.length) {
        empty(s, "The trace has no host ops or device work to split into steps.");
      } else {
        var x = steps.map(function (_, i) { return i; });
        var sum = steps.map(function () { return 0; });
        var stacked = PARTS.map(function (p) {
          return steps.map(function (st, i) { sum[i] += st[p[0]] / 1e6; return sum[i]; });
        });
        var series = [{ label: "Step" }];
        var data = [x];
        // Drawn from the top down, each bar from 0 to its running total.
        for (var i = PARTS.length - 1; i >= 0; i--) {
          series.push({ label: PARTS[i][1], fill: PARTS[i][2], stroke: PARTS[i][2], paths: uPlot.paths.bars({ size: [0.6] }), points: { show: false } });
          data.push(stacked[i]);
        }
        chart(s, "Time per step (ms)", {
          series: series,
          scales: {
            x: { time: false, range: [-0.5, steps.length - 0.5] },
            y: { range: function (u, min, max) { return [0, max * 1.05]; } }
          },
          axes: [{ values: function (u, vals) { return vals.map(function (v) { var st = steps[v]; return st ? (st.number === null ? "trace" : "#" + st.number) : ""; }); } }, {}]
        }, data);
        var columns = [
          { key: "number", label: "Step", format: function (n) { return n === null ? "whole trace (no ProfilerStep#N)" : "ProfilerStep#" + n; } },
          { key: "duration", label: "Duration (us)", numeric: true, format: nsAsUs, sortValue: function (r) { return r.end_ns - r.start_ns; } }
        ];
        PARTS.forEach(function (p) {
          columns.push({ key: p[0], label: p[1] + " (us)", numeric: true, format: nsAsUs });
        });
        if (model.steps.has_device) {
          columns.push({ key: "device_utilization", label: "Device utilization (%)", numeric: true, format: function (v) { return v.toFixed(2); } });
        }
        var rows = steps.map(function (st) { var r = Object.assign({}, st); r.duration = st.end_ns - st.start_ns; return r; });
        s.appendChild(text("h3", "Steps"));
        s.appendChild(table(columns, rows));
        if (!model.steps.has_device) {
          empty(s, "No device utilization: the trace has no device rows (no kernels, copies or fills).");
        }
      }
      s.appendChild(text("h3", "Top ops by self CPU time"));
      s.appendChild(table([
        { key: "name", label: "Name" },
        { key: "count", label: "# of Calls", numeric: true },
        { key: "self_cpu_time_total_us", label: "Self CPU (us)", numeric: true, format: fixed3 }
      ], model.top_ops.rows.filter(function (r) { return !r.on_device; })));
      var kernels = model.top_kernels.rows.filter(function (r) { return r.on_device && !r.user_annotation && r.self_device_time_total_us > 0; });
      s.appendChild(text("h3", "Top kernels by device time"));
      if (kernels.length) {
        s.appendChild(table([
          { key: "name", label: "Name" },
          { key: "count", label: "# of Calls", numeric: true },
          { key: "self_device_time_total_us", label: "Self " + model.top_kernels.device + " (us)", numeric: true, format: fixed3 }
        ], kernels));
      } else {
        empty(s, "No kernels: the trace has no device rows.");
      }
    },

    operators: function (s) {
      var doc = model.operators;
      if (!doc.rows.length) return empty(s, "The trace has no host ops or device activities to summarize.");
      s.appendChild(text("p", "Self CPU time total: " + fixed3(doc.self_cpu_time_total_us) + "us; self " +
        doc.device + " time total: " + fixed3(doc.self_device_time_total_us) + "us"));
      leftOut(s, model.left_out.operators, "the " + doc.rows.length + " rows with the most self CPU plus self " +
        doc.device + " time (the totals above are of every row; omniprof summary --row-limit -1 prints them all)");
      s.appendChild(table(keyAverageColumns(doc), doc.rows, { search: true, id: "operators" }));
    },

    kernels: function (s) {
      if (!model.kernels.length) {
        empty(s, "The trace has no device rows: no kernels ran (or the backend recorded none).");
      } else {
        leftOut(s, model.left_out.kernels, "the " + model.kernels.length + " kernels with the most total time");
        s.appendChild(table([
          { key: "name", label: "Kernel" },
          { key: "calls", label: "Calls", numeric: true },
          { key: "total_ns", label: "Total (us)", numeric: true, format: nsAsUs },
          { key: "mean_ns", label: "Mean (us)", numeric: true, format: nsAsUs },
          { key: "min_ns", label: "Min (us)", numeric: true, format: nsAsUs },
          { key: "max_ns", label: "Max (us)", numeric: true, format: nsAsUs }
        ], model.kernels, { search: true, id: "kernels" }));
      }
      s.appendChild(text("h3", "Hardware metrics"));
      var metrics = [];
      model.kernel_metrics.kernels.forEach(function (k) {
        k.metrics.forEach(function (m) {
          metrics.push({ kernel: k.name, metric: m.name, sum: m.sum, mean: m.mean, min: m.min, max: m.max });
        });
      });
      if (!metrics.length) {
        empty(s, "No hardware metrics: the trace has no scope-profiler kernel metrics or cuda_profiler_range events.");
      } else {
        leftOut(s, model.left_out.metrics, "the " + metrics.length + " rows of the kernels with the most device time " +
          "(omniprof summary --metrics prints them all)");
        s.appendChild(table([
          { key: "kernel", label: "Kernel" }, { key: "metric", label: "Metric" },
          { key: "sum", label: "Sum", numeric: true }, { key: "mean", label: "Mean", numeric: true },
          { key: "min", label: "Min", numeric: true }, { key: "max", label: "Max", numeric: true }
        ], metrics, { search: true }));
      }
      s.appendChild(text("h3", "Counters"));
      if (!model.counters.length) {
        return empty(s, "No counter tracks: the trace has no PM counter or perf event samples.");
      }
      leftOut(s, model.left_out.counters, "the first " + model.counters.length +
        " (omniprof summary --counters prints them all)");
      s.appendChild(table([
        { key: "counter", label: "Counter" }, { key: "device", label: "Device", numeric: true },
        { key: "resource", label: "Resource", numeric: true },
        { key: "value", label: "Value" }, { key: "kind", label: "Type" },
        { key: "samples", label: "Samples", numeric: true }, { key: "min", label: "Min", numeric: true },
        { key: "mean", label: "Mean", numeric: true }, { key: "max", label: "Max", numeric: true },
        { key: "time_weighted_mean", label: "Time-weighted mean", numeric: true }
      ], model.counters, { search: true }));
      if (model.left_out.counter_charts) {
        s.appendChild(text("p", "The page charts the " + model.counter_lines.length + " counter values with the most samples; " +
          model.left_out.counter_charts + " more are not charted.", { "class": "left-out" }));
      }
      model.counter_lines.forEach(function (line) {
        if (!line.points.length) return;
        var t0 = line.points[0][0];
        chart(s, line.counter + " (device " + line.device + ", resource " + line.resource + ") / " + line.value, {
          height: 200,
          scales: { x: { time: false } },
          axes: [{}, { size: 80 }],
          series: [{ label: "ms" }, { label: line.value, stroke: "#4e79a7" }]
        }, [line.points.map(function (p) { return (p[0] - t0) / 1e6; }), line.points.map(function (p) { return p[1]; })]);
      });
    },

    memory: function (s) {
      if (!model.memory.length) {
        return empty(s, "The trace has no memory events ([memory] records: PyTorch writes them with profile_memory=True).");
      }
      model.memory.forEach(function (c) {
        s.appendChild(text("p", c.device + ": peak allocated " + c.peak_allocated + " B, peak reserved " +
          c.peak_reserved + " B, " + c.records + " records", { "class": "peak" }));
        var t0 = c.points[0].time_ns;
        chart(s, c.device + ": memory (MiB) over time (ms)", {
          scales: { x: { time: false } },
          axes: [{}, { size: 80 }],
          series: [{ label: "ms" }, { label: "Allocated", stroke: "#4e79a7" }, { label: "Reserved", stroke: "#e15759" }]
        }, [
          c.points.map(function (p) { return (p.time_ns - t0) / 1e6; }),
          c.points.map(function (p) { return p.allocated / 1048576; }),
          c.points.map(function (p) { return p.reserved / 1048576; })
        ]);
      });
      s.appendChild(text("h3", "Ops that allocated most"));
      s.appendChild(table([
        { key: "name", label: "Name" },
        { key: "self_device_memory_usage", label: "Self " + model.top_memory.device + " Mem (B)", numeric: true },
        { key: "self_cpu_memory_usage", label: "Self CPU Mem (B)", numeric: true },
        { key: "count", label: "# of Calls", numeric: true }
      ], model.top_memory.rows));
    },

    distributed: function (s) {
      var r = model.ranks;
      if (!r) {
        return empty(s, "One rank: the distributed view compares the ranks of a job (give several traces, or a directory of them).");
      }
      var names = r.ranks.map(function (t, i) { return t.profile.rank === null ? "trace #" + i : "rank " + t.profile.rank; });
      if (r.straggler) {
        s.appendChild(text("p", "Slowest rank: " + names[r.straggler.index] + " (the most time outside communication), slowest in " + r.straggler.slowest_in +
          " of " + r.straggler.steps + " steps, " + nsAsUs(r.straggler.mean_lag_ns) + "us behind the median on average.", { "class": "straggler" }));
      }
      if (r.steps.length) {
        var series = [{ label: "Step" }].concat(names.map(function (n, i) {
          return { label: n, stroke: ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7"][i % 8] };
        }));
        var data = [r.steps.map(function (st) { return st.number; })].concat(names.map(function (_, i) {
          return r.steps.map(function (st) { var d = st.durations_ns[i]; return d === null ? null : d / 1e6; });
        }));
        // Steps are whole numbers: ticks at whole steps only.
        var wholeSteps = {
          incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000],
          values: function (u, vals) { return vals.map(function (v) { return Number.isInteger(v) ? String(v) : ""; }); }
        };
        chart(s, "Step time per rank (ms)", { scales: { x: { time: false } }, axes: [wholeSteps, {}], series: series }, data);
        var columns = [{ key: "number", label: "Step", format: function (n) { return "ProfilerStep#" + n; } }];
        names.forEach(function (n, i) {
          columns.push({ key: "rank" + i, label: n + " (us)", numeric: true });
        });
        columns.push(
          { key: "slowest", label: "Slowest (outside comm.)" },
          { key: "median_ns", label: "Median outside communication (us)", numeric: true, format: nsAsUs },
          { key: "lag_ns", label: "Lag (us)", numeric: true, format: nsAsUs }
        );
        var rows = r.steps.map(function (st) {
          var row = { number: st.number, median_ns: st.median_ns, lag_ns: st.lag_ns, slowest: st.slowest === null ? "" : names[st.slowest] };
          names.forEach(function (_, i) {
            var d = st.durations_ns[i];
            row["rank" + i] = d === null ? "" : nsAsUs(d) + (st.slowest === i ? " (slowest outside comm.)" : "");
          });
          return row;
        });
        s.appendChild(text("h3", "Step times"));
        s.appendChild(table(columns, rows));
      }
      s.appendChild(text("h3", "Where each rank's time went"));
      s.appendChild(table([
        { key: "name", label: "Rank" }, { key: "source", label: "Counted" },
        { key: "span_ns", label: "Span (us)", numeric: true, format: nsAsUs },
        { key: "computation_ns", label: "Computation (us)", numeric: true, format: nsAsUs },
        { key: "communication_ns", label: "Communication (us)", numeric: true, format: nsAsUs },
        { key: "memory_ns", label: "Memory (us)", numeric: true, format: nsAsUs },
        { key: "overlap_ns", label: "Overlap (us)", numeric: true, format: nsAsUs },
        { key: "idle_ns", label: "Idle (us)", numeric: true, format: nsAsUs },
        { key: "partial", label: "Read" }
      ], r.ranks.map(function (t, i) {
        var b = Object.assign({ name: names[i], source: t.profile.source, partial: t.error ? "in part: " + t.error : "whole" }, t.profile.breakdown);
        return b;
      }), { rowClass: function (row) { return r.straggler && row.name === names[r.straggler.index] ? "straggler" : ""; } }));
    },

    trace: function (s) {
      s.appendChild(text("p", "The report summarizes the trace; it does not hold it. To see the timeline, choose the trace file " +
        "(" + model.traces.map(function (t) { return t.label; }).join(", ") + ") and open it in the Perfetto UI: the page opens " +
        "ui.perfetto.dev in a new tab and hands it the file with Perfetto's postMessage protocol (PING until the UI answers PONG, " +
        "then the file's bytes). The file goes from this browser to that tab, not to a server."));
      var input = el("input", { type: "file", id: "trace-file" });
      var button = text("button", "Open in Perfetto UI", { id: "open-perfetto" });
      var status = text("p", "", { id: "perfetto-status" });
      button.addEventListener("click", function () {
        var file = input.files && input.files[0];
        if (!file) { status.textContent = "Choose the trace file first."; return; }
        if (!navigator.onLine) { status.textContent = "The browser is offline: see below."; return; }
        var ui = window.open("https://ui.perfetto.dev");
        if (!ui) { status.textContent = "The browser blocked the new tab: allow pop-ups for this page."; return; }
        file.arrayBuffer().then(function (buffer) {
          var timer = setInterval(function () { ui.postMessage("PING", "https://ui.perfetto.dev"); }, 50);
          window.addEventListener("message", function onPong(e) {
            if (e.source !== ui || e.data !== "PONG") return;
            clearInterval(timer);
            window.removeEventListener("message", onPong);
            ui.postMessage({ perfetto: { buffer: buffer, title: file.name, fileName: file.name } }, "https://ui.perfetto.dev");
            status.textContent = "Sent " + file.name + " to the Perfetto UI.";
          });
        });
      });
      s.appendChild(el("p", {}, [input, button]));
      s.appendChild(status);
      s.appendChild(text("h3", "Offline"));
      s.appendChild(text("p", "Without a network (as on many GPU clusters) the Perfetto UI cannot be reached from here. Copy the trace " +
        "to a machine that is online and drop it on ui.perfetto.dev (the UI runs in the browser: the trace is not uploaded), or " +
        "write it as Perfetto's own format first (omniprof convert TRACE trace.pftrace), which the UI and trace_processor open fastest."));
    },

    diff: function (s) {
      var d = model.diff;
      if (!d) return empty(s, "No base trace: omniprof report --base BASE TRACE compares two traces op by op.");
      if (!d.rows.length) return empty(s, "Neither trace has rows to compare.");
      function pair(field, label, format) {
        return [
          { key: field + ".base", label: label + " base", numeric: true, format: format },
          { key: field + ".new", label: label + " new", numeric: true, format: format },
          { key: field + ".delta", label: label + " delta", numeric: true, format: format }
        ];
      }
      var rows = d.rows.map(function (r) {
        var flat = { name: r.name, change: r.change };
        ["count", "self_cpu_time_total_us", "self_device_time_total_us", "cpu_time_total_us"].forEach(function (f) {
          ["base", "new", "delta"].forEach(function (k) { flat[f + "." + k] = r[f][k]; });
        });
        flat["self_cpu_time_total_us.ratio"] = r.self_cpu_time_total_us.ratio;
        return flat;
      });
      var columns = [{ key: "name", label: "Name" }, { key: "change", label: "Change" }]
        .concat(pair("count", "Calls", plain))
        .concat(pair("self_cpu_time_total_us", "Self CPU (us)", fixed3))
        .concat([{ key: "self_cpu_time_total_us.ratio", label: "Self CPU ratio", numeric: true, format: function (v) { return v === null ? "" : v.toFixed(3); } }])
        .concat(pair("self_device_time_total_us", "Self " + d.device + " (us)", fixed3));
      leftOut(s, model.left_out.diff, "the " + d.rows.length + " largest regressions (omniprof diff prints every row)");
      s.appendChild(table(columns, rows, { search: true, id: "diff" }));
    }
  };

  var nav = document.getElementById("nav");
  var views = document.getElementById("views");
  VIEWS.forEach(function (v) {
    var section = el("section", { id: "view-" + v[0], "data-view": v[0] });
    section.appendChild(text("h2", v[1]));
    build[v[0]](section);
    views.appendChild(section);
    nav.appendChild(text("a", v[1], { href: "#" + v[0], "data-view": v[0] }));
  });
  function show() {
    var name = location.hash.slice(1) || "overview";
    if (!document.getElementById("view-" + name)) name = "overview";
    VIEWS.forEach(function (v) {
      document.getElementById("view-" + v[0]).hidden = v[0] !== name;
      nav.querySelector('[data-view="' + v[0] + '"]').className = v[0] === name ? "current" : "";
    });
  }
  window.addEventListener("hashchange", show);
  show();
  document.body.setAttribute("data-ready", "true");
})();
