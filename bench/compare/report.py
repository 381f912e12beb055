#!/usr/bin/env python3
"""Reads the raw outputs bench/compare.sh left in its work folder and prints
the comparison table (markdown) and writes it, with every raw figure, as JSON.

Each engine's figure for a workload is the mean over its runs (each run: the
mean of its repetitions); the range over runs is shown beside it, and the
run-to-run spread is the noise estimate. Beside the ratio of the means, the
ratio of each engine's best run (noise from other work only ever slows a run). Bounds come from troupe_bench_bounds
at the start and at the end of the same run (their mean is used)."""
import argparse
import glob
import json
import os
import platform
import re
import subprocess
import sys
import time


def die(msg):
    print(f"report.py: {msg}", file=sys.stderr)
    sys.exit(1)


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        die(f"cannot read {path}: {e}")


def json_lines(path):
    """JSON objects on their own lines (llama-batched-bench --output-format jsonl mixes them with logs)."""
    out = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:
                    pass
    return out


def llama_bench_json(path):
    """llama-bench -o json prints one JSON array on stdout."""
    with open(path) as f:
        text = f.read()
    start = text.find("[")
    if start < 0:
        die(f"{path} holds no llama-bench JSON")
    try:
        return json.loads(text[start:])
    except json.JSONDecodeError as e:
        die(f"{path}: llama-bench JSON does not parse: {e}")


def mean(v):
    return sum(v) / len(v) if v else None


class Figure:
    """One engine's figure for one workload: one value per run."""

    def __init__(self, runs):
        self.runs = [r for r in runs if r is not None]

    @property
    def value(self):
        return mean(self.runs)

    @property
    def spread(self):  # (max - min) / mean over runs
        if len(self.runs) < 2 or not self.value:
            return None
        return (max(self.runs) - min(self.runs)) / self.value

    def text(self, fmt="{:.1f}"):
        if not self.runs:
            return "n/a"
        s = fmt.format(self.value)
        if len(self.runs) > 1:
            s += " (" + "–".join(fmt.format(x) for x in (min(self.runs), max(self.runs))) + ")"
        return s

    def best(self, lower_is_better):
        return (min if lower_is_better else max)(self.runs) if self.runs else None

    def as_json(self):
        return {"mean": self.value, "runs": self.runs, "spread": self.spread}


def pct(x):
    return "n/a" if x is None else f"{100 * x:.0f}%"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("work")
    ap.add_argument("--json", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--reps", type=int, required=True)
    ap.add_argument("--levels", required=True)
    ap.add_argument("--serve-levels", required=True)
    ap.add_argument("--serve", type=int, required=True)
    ap.add_argument("--quick", type=int, required=True)
    ap.add_argument("--prompt", type=int, required=True)
    ap.add_argument("--gen", type=int, required=True)
    ap.add_argument("--batch-in", type=int, required=True)
    ap.add_argument("--batch-out", type=int, required=True)
    ap.add_argument("--llama-version", default="unknown")
    a = ap.parse_args()
    w = a.work
    reps = range(1, a.reps + 1)
    levels = [int(x) for x in a.levels.split(",")] if a.levels != "none" else []  # none: --no-batched
    serve_levels = [int(x) for x in a.serve_levels.split(",")] if a.serve else []

    # Bounds: the better of the start and end measurements (each already a best of several tries).
    b0, b1 = load_json(f"{w}/bounds-start.json"), load_json(f"{w}/bounds-end.json")
    bw_key = "model_read_bandwidth_gbs" if "model_read_bandwidth_gbs" in b0 else "read_bandwidth_gbs"
    bw = max(b0[bw_key], b1[bw_key])
    bytes_tok = b0["bytes_per_token"]
    body, head = b0["body_macs_per_token"], b0["head_macs_per_token"]
    decode_bound = bw * 1e9 / bytes_tok

    def peak_of(key):
        v = [b[key] for b in (b0, b1) if key in b]
        return max(v) if v else None

    # Each engine against the multiply-add peak of the kernels it runs here:
    # troupe's are AVX2 (under its plain avx2 ISA, 8-bit activations whose vpmaddubsw
    # pair sums are added in int16 over a block's runs, so the vpmaddubsw + vpaddw
    # loop is their ceiling; bounds files from before that loop fall back to
    # vpmaddubsw + vpmaddwd, which those kernels exceed), or, where it chose the
    # avx512_vnni ISA, vpdpwssd on 512-bit registers for the batched matmuls of the
    # 32-element block types (Q4_0/Q4_1/Q5_x/Q8_0; K-quants stay AVX2); llama.cpp's native build
    # uses vpdpbusd on 256-bit registers where the CPU has VNNI, and AMX tiles for
    # batches when its AMX buffer is on (repacking not switched off) and the CPU has AMX.
    flags = set()
    try:
        flags = set(re.search(r"^flags\s*:\s*(.*)$", open("/proc/cpuinfo").read(), re.M).group(1).split())
    except (OSError, AttributeError):
        pass
    llama_mode = open(f"{w}/llama-mode.txt").read().strip() if os.path.exists(f"{w}/llama-mode.txt") else "default"
    troupe_kernel = ("AVX2", peak_of("int8_peak_gmacs"))
    if b0.get("isa") == "avx2" and peak_of("int8_peak_gmacs_maddubs_i16"):
        troupe_kernel = ("AVX2 i16", peak_of("int8_peak_gmacs_maddubs_i16"))
    if b0.get("isa") == "avx512_vnni" and peak_of("int8_peak_gmacs_wssd512"):
        troupe_kernel = ("VNNI zmm", peak_of("int8_peak_gmacs_wssd512"))
    if llama_mode == "default" and "amx_int8" in flags and peak_of("int8_peak_gmacs_amx"):
        llama_kernel = ("AMX-INT8", peak_of("int8_peak_gmacs_amx"))
    elif ("avx512_vnni" in flags and "avx512vl" in flags or "avx_vnni" in flags) and peak_of("int8_peak_gmacs_vnni256"):
        llama_kernel = ("VNNI ymm", peak_of("int8_peak_gmacs_vnni256"))
    else:
        llama_kernel = ("AVX2", peak_of("int8_peak_gmacs_maddubs"))

    def mac_bound(kernel, macs):
        return kernel[1] * 1e9 / macs if kernel[1] else None

    # Decode and prefill.
    t_dec, t_pre, l_dec, l_pre, llama_info = [], [], [], [], {}
    for r in reps:
        e = load_json(f"{w}/e2e-{r}.json")
        t_dec.append(mean(e["decode_tps"]))
        t_pre.append(mean(e["prefill_tps"]))
        for row in llama_bench_json(f"{w}/llama-bench-{r}.out"):
            llama_info = {k: row.get(k) for k in ("build_commit", "build_number", "cpu_info", "model_type",
                                                   "model_size", "model_n_params", "flash_attn", "n_threads")}
            samples = row.get("samples_ts") or [row.get("avg_ts")]
            if row.get("n_gen", 0) > 0 and row.get("n_prompt", 0) == 0:
                l_dec.append(mean(samples))
            elif row.get("n_prompt", 0) > 0 and row.get("n_gen", 0) == 0:
                l_pre.append(mean(samples))
    rows = []

    def add(name, unit, t, l, bounds=(None, None), lower_is_better=False):
        rows.append({"workload": name, "unit": unit, "troupe": t, "llama": l, "bounds": bounds,
                     "lower_is_better": lower_is_better})

    dec = (decode_bound, "bandwidth")
    add(f"decode, 1 stream, {a.gen} tokens", "tok/s", Figure(t_dec), Figure(l_dec), (dec, dec))
    pre_macs = body + head / a.prompt
    add(f"prefill {a.prompt}", "tok/s", Figure(t_pre), Figure(l_pre),
        tuple((mac_bound(k, pre_macs), k[0]) if k[1] else None for k in (troupe_kernel, llama_kernel)))

    # Batched decode.
    t_b = {n: [] for n in levels}
    l_b = {n: [] for n in levels}
    outside = {n: [] for n in levels}
    for r in (reps if levels else []):
        for row in load_json(f"{w}/engine-{r}.json")["levels"]:
            if row["concurrency"] in t_b:
                t_b[row["concurrency"]].append(row["decode_tps"])
                outside[row["concurrency"]].append(row["outside_model"])
        got = {row["pl"]: row for row in json_lines(f"{w}/batched-bench-{r}.out") if "speed_tg" in row}
        if not got:
            die(f"{w}/batched-bench-{r}.out has no llama-batched-bench JSON lines")
        for n in levels:
            if n in got:
                l_b[n].append(got[n]["speed_tg"])
    def roofline(kernel, n):  # the lower of n x the decode bound and the kernel's MAC bound
        mb = mac_bound(kernel, body + head)
        return (n * decode_bound, "bandwidth") if mb is None or n * decode_bound <= mb else (mb, kernel[0])

    for n in levels:
        add(f"batched decode, {n} stream{'s' if n > 1 else ''} ({a.batch_in} in, {a.batch_out} out)", "tok/s",
            Figure(t_b[n]), Figure(l_b[n]), (roofline(troupe_kernel, n), roofline(llama_kernel, n)))

    # Serving.
    serve_raw = {}
    for c in serve_levels:
        per = {}
        for eng in ("troupe", "llama"):
            runs = []
            for r in reps:
                j = load_json(f"{w}/serve-{eng}-{r}-c{c}.json")
                if j["failed"]:
                    die(f"serve-{eng}-{r}-c{c}: {j['failed']} requests failed")
                runs.append(j)
            per[eng] = runs
        serve_raw[c] = per
        pick = lambda eng, k: Figure([j[k] for j in per[eng]])
        add(f"serve, concurrency {c}: output", "tok/s", pick("troupe", "output_throughput"),
            pick("llama", "output_throughput"))
        add(f"serve, concurrency {c}: median TTFT", "ms", pick("troupe", "median_ttft_ms"),
            pick("llama", "median_ttft_ms"), lower_is_better=True)
        add(f"serve, concurrency {c}: median ITL", "ms", pick("troupe", "median_itl_ms"),
            pick("llama", "median_itl_ms"), lower_is_better=True)

    # The table.
    def load(path):
        try:
            return open(path).read().strip()
        except OSError:
            return ""

    cpu = ""
    try:
        cpu = re.search(r"model name\s*:\s*(.*)", open("/proc/cpuinfo").read()).group(1)
    except (OSError, AttributeError):
        cpu = platform.processor()
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                check=True).stdout.strip()
        if subprocess.run(["git", "diff", "--quiet", "HEAD"]).returncode != 0:
            commit += "+dirty"
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    when = time.strftime("%Y-%m-%d %H:%M %Z")
    out = []
    out.append(f"troupe {commit} vs llama.cpp {a.llama_version}, {os.path.basename(a.model)}, {a.threads} threads, "
               f"{a.reps} run(s) of each engine per workload{' (quick)' if a.quick else ''}")
    out.append(f"{cpu}, {os.cpu_count()} CPUs, {when}")
    out.append(f"bounds (better of start/end): read bandwidth over the model's bytes {bw:.1f} GB/s "
               f"({b0[bw_key]:.1f} / {b1[bw_key]:.1f}; over 128 MiB {b0['read_bandwidth_gbs']:.1f} / "
               f"{b1['read_bandwidth_gbs']:.1f}), "
               f"{bytes_tok / 1e6:.1f} MB/token -> decode bound {decode_bound:.0f} tok/s; "
               f"{body / 1e6:.1f} M MACs/token (+{head / 1e6:.1f} M for logits); multiply-add peaks on {a.threads} "
               f"threads: troupe {troupe_kernel[0]} {troupe_kernel[1] or 0:.0f} GMAC/s, "
               f"llama.cpp {llama_kernel[0]} {llama_kernel[1] or 0:.0f} GMAC/s")
    out.append(f"llama.cpp mode: {llama_mode}")
    out.append("")
    out.append("| workload | troupe | llama.cpp | troupe / llama.cpp | best run / best run | "
               "troupe, share of its bound | llama.cpp, share of its bound | bound (troupe; llama.cpp) |")
    out.append("|---|---|---|---|---|---|---|---|")
    table = []
    for row in rows:
        t, l = row["troupe"], row["llama"]
        ratio = t.value / l.value if t.value and l.value else None
        lib = row["lower_is_better"]
        best_ratio = t.best(lib) / l.best(lib) if t.runs and l.runs and l.best(lib) else None
        tb, lb = row["bounds"]
        share = lambda f, b: f.value / b[0] if b and b[0] and f.value else None
        entry = {"workload": row["workload"], "unit": row["unit"], "troupe": t.as_json(), "llama.cpp": l.as_json(),
                 "ratio": ratio, "best_run_ratio": best_ratio, "lower_is_better": row["lower_is_better"],
                 "troupe_bound": tb and {"value": tb[0], "kind": tb[1]},
                 "llama_bound": lb and {"value": lb[0], "kind": lb[1]},
                 "troupe_share_of_bound": share(t, tb), "llama_share_of_bound": share(l, lb)}
        table.append(entry)
        fmt = "{:.0f}" if row["unit"] == "ms" and (t.value or 0) > 100 else "{:.1f}"
        better = ", lower is better" if row["lower_is_better"] else ""
        ratio_s = "n/a" if ratio is None else f"{ratio:.2f}×"
        if not tb and not lb:
            bound_s = "—"
        elif tb == lb:
            bound_s = f"{tb[0]:.0f} ({tb[1]})"
        else:
            bound_s = "; ".join("n/a" if not b else f"{b[0]:.0f} ({b[1]})" for b in (tb, lb))
        best_s = "n/a" if best_ratio is None else f"{best_ratio:.2f}×"
        out.append(f"| {row['workload']} ({row['unit']}{better}) | {t.text(fmt)} | {l.text(fmt)} | {ratio_s} | {best_s} | "
                   f"{pct(entry['troupe_share_of_bound'])} | {pct(entry['llama_share_of_bound'])} | {bound_s} |")
    spreads = [(r["workload"], eng, f.spread) for r in rows for eng, f in (("troupe", r["troupe"]), ("llama.cpp", r["llama"]))
               if f.spread is not None]
    out.append("")
    if spreads:
        worst = max(spreads, key=lambda x: x[2])
        typical = sorted(s for _, _, s in spreads)[len(spreads) // 2]
        out.append(f"noise: run-to-run spread (max-min)/mean median {100 * typical:.0f}%, worst {100 * worst[2]:.0f}% "
                   f"({worst[1]}, {worst[0]}); bandwidth start/end {b0[bw_key]:.1f}/{b1[bw_key]:.1f} GB/s")
    else:
        out.append("noise: one run per engine (--quick), no run-to-run spread")
    shares = {}
    for name in ("e2e", "llama-bench") + (("engine", "batched-bench") if levels else ()):
        vals = []
        for r in reps:
            try:
                wall, cpu_s = (float(x) for x in open(f"{w}/{name}-{r}.time").read().split()[:2])
                vals.append(cpu_s / (wall * a.threads) if wall > 0 else None)
            except (OSError, ValueError):
                vals.append(None)
        shares[name] = vals
    out.append("CPU share each run got of its " + str(a.threads) + " threads (CPU time / wall / threads): " +
               "; ".join(f"{n} " + ", ".join(pct(v) for v in vals) for n, vals in shares.items()) +
               f"; multiply-add peak loops {pct(b0.get('int8_peak_cpu_share'))} / {pct(b1.get('int8_peak_cpu_share'))}")
    busy = {}
    for path in sorted(glob.glob(f"{w}/*.busy")):
        try:
            pct_busy, waited = (int(x) for x in open(path).read().split())
            busy[os.path.basename(path)[:-5]] = {"busy_pct": pct_busy, "waited_s": waited}
        except (OSError, ValueError):
            pass
    if busy:
        vals = sorted(v["busy_pct"] for v in busy.values())
        waited = sum(v["waited_s"] for v in busy.values())
        out.append(f"other work on the machine just before each run (% of all CPUs busy, 1 s sample): median "
                   f"{vals[len(vals) // 2]}%, max {vals[-1]}% over {len(vals)} runs; waited {waited} s in all for "
                   f"quieter moments")
    out.append(f"load average at start: {load(f'{w}/load-start.txt')}")
    out.append(f"load average at end:   {load(f'{w}/load-end.txt')}")
    if any(outside[n] for n in levels):
        out.append("troupe time outside the model (batched runs): " +
                   ", ".join(f"{n} streams {pct(mean(outside[n]))}" for n in levels if outside[n]))
    print("\n".join(out))

    result = {
        "date": when, "machine": {"cpu": cpu, "cpus": os.cpu_count(), "kernel": platform.release()},
        "troupe_commit": commit, "llama_cpp": dict(llama_info, version=a.llama_version), "model": a.model, "threads": a.threads,
        "runs_per_engine": a.reps, "quick": bool(a.quick),
        "bounds": {"start": b0, "end": b1, "read_bandwidth_gbs": bw, "decode_bound_tps": decode_bound,
                   "troupe_kernel": troupe_kernel, "llama_kernel": llama_kernel, "cpu_flags_used": sorted(
                       f for f in flags if f in ("avx2", "avx512vl", "avx512_vnni", "avx_vnni", "amx_int8")),
                   "note": "prefill/batched bound: the engine's kernel's multiply-add peak (all threads, measured "
                           "by troupe_bench_bounds) / matmul multiply-adds per token, attention excluded; batched: "
                           "the lower of that and streams x the decode bound"},
        "llama_mode": llama_mode,
        "table": table, "batched_outside_model": {str(n): outside[n] for n in levels},
        "serve": {str(c): v for c, v in serve_raw.items()},
        "cpu_share": shares, "busy_before_runs": busy, "load_start": load(f"{w}/load-start.txt"), "load_end": load(f"{w}/load-end.txt"),
        "commands": load(f"{w}/commands.txt").splitlines(), "table_markdown": "\n".join(out),
    }
    with open(a.json, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
