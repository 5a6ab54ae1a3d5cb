#!/usr/bin/python3
"""Scrapes a running `ringkernel demo --metrics` with curl and checks the
exposition with the Prometheus client library's own parser
(python3-prometheus-client from Debian).

usage: scrape_prometheus.py RINGKERNEL_BINARY

The demo serves on a port of its own choosing (127.0.0.1:0) and prints it.
The script scrapes /metrics in a loop while the pipeline runs, parses every
answer, and checks: the ringkernel_* families and their types, one series
per pipeline kernel with a `kernel` label, counters that never go back
between scrapes, summary quantiles in order, and /stats.json agreeing with
the same endpoint. Exit 77 (skipped) when prometheus_client is missing.
"""
import json
import re
import subprocess
import sys

try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError:
    print("prometheus_client missing: install python3-prometheus-client")
    sys.exit(77)

KERNELS = {"source", "detector", "alerter", "sink"}


def curl(url):
    out = subprocess.run(["curl", "-sS", "--fail", "--max-time", "10", url],
                         check=True, capture_output=True, text=True)
    return out.stdout


def parse(text):
    fams = {}
    for fam in text_string_to_metric_families(text):
        fams[fam.name] = fam
    return fams


def by_kernel(fam, sample_name):
    return {s.labels["kernel"]: s.value for s in fam.samples
            if s.name == sample_name and "kernel" in s.labels}


def main():
    demo = subprocess.Popen(
        [sys.argv[1], "demo", "--duration", "2", "--sensors", "8",
         "--metrics", "127.0.0.1:0"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    port = None
    for line in demo.stdout:
        m = re.match(r"metrics: http://127\.0\.0\.1:(\d+)/metrics", line)
        if m:
            port = int(m.group(1))
            break
    assert port, "the demo did not print its metrics port"
    base = "http://127.0.0.1:%d" % port

    prev = None
    scrapes = 0
    # Scrape until the demo ends (its endpoint closes); at least a few.
    while demo.poll() is None:
        try:
            text = curl(base + "/metrics")
        except subprocess.CalledProcessError:
            break  # the demo stopped serving between poll and curl
        fams = parse(text)
        scrapes += 1
        # prometheus_client drops the _total suffix from counter names.
        processed = fams["ringkernel_messages_processed"]
        assert processed.type == "counter", processed.type
        assert fams["ringkernel_queue_depth"].type == "gauge"
        assert fams["ringkernel_queue_high_water"].type == "gauge"
        assert fams["ringkernel_kernel_restarts"].type == "counter"
        assert fams["ringkernel_dead_letters"].type == "counter"
        assert fams["ringkernel_topic_published"].type == "counter"
        assert fams["ringkernel_gpu_monitor_available"].type == "gauge"
        lat = fams["ringkernel_message_latency_seconds"]
        assert lat.type == "summary", lat.type
        counts = by_kernel(processed, "ringkernel_messages_processed_total")
        assert set(counts) == KERNELS, counts
        for k in KERNELS:
            q = {s.labels["quantile"]: s.value for s in lat.samples
                 if s.labels.get("kernel") == k and "quantile" in s.labels}
            assert set(q) == {"0.5", "0.9", "0.99", "0.999"}, q
            assert q["0.5"] <= q["0.9"] <= q["0.99"] <= q["0.999"], q
        if prev:
            for k in KERNELS:
                assert counts[k] >= prev[k], (k, prev[k], counts[k])
        prev = counts
        if scrapes == 3:
            stats = json.loads(curl(base + "/stats.json"))
            ids = {k["id"] for k in stats["kernels"]}
            assert ids == KERNELS, ids
            assert [t["name"] for t in stats["topics"]] == ["alerts"]
    out = demo.stdout.read()
    assert demo.wait() == 0, out
    assert scrapes >= 3, "only %d scrapes while the demo ran" % scrapes
    assert prev["detector"] > 0, prev
    print("ok: %d scrapes parsed by prometheus_client; last counts %s"
          % (scrapes, prev))


if __name__ == "__main__":
    main()
