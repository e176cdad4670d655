#!/usr/bin/env node
// One ONNX Runtime (CPU provider) measurement, the ORT half of tests/bench/compare_ort.
//   node ort_bench.js SPEC.json
// SPEC: {"model", "threads", "runs", "warmup", "inputs": [{"name", "dtype", "shape", "file"}]}
// (raw little-endian input files). Prints one JSON object: p50_ms, p90_ms, min_ms, load_ms
// (file to ready session, graph optimisation 'all'), first_run_ms (the run right after loading,
// before the warm-up), peak_rss_bytes, baseline_rss_bytes (the process before ORT was loaded).
'use strict';
const fs = require('fs');
// VmHWM: this process's own peak (maxRSS would include a parent's peak across fork + exec).
const peakRss = () => Number(/VmHWM:\s*(\d+)/.exec(fs.readFileSync('/proc/self/status', 'utf8'))[1]) * 1024;
const baselineRss = peakRss();
const ort = require(process.env.ORT_NODE || 'onnxruntime-node');

const ARRAYS = {
  float32: Float32Array, float64: Float64Array, int64: BigInt64Array, int32: Int32Array,
  int16: Int16Array, int8: Int8Array, uint8: Uint8Array, uint16: Uint16Array, bool: Uint8Array,
};

function ms(t0) { return Number(process.hrtime.bigint() - t0) / 1e6; }

async function main() {
  const spec = JSON.parse(fs.readFileSync(process.argv[2]));
  const feeds = {};
  for (const t of spec.inputs) {
    const buf = fs.readFileSync(t.file);
    const ab = buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength);
    feeds[t.name] = new ort.Tensor(t.dtype, new ARRAYS[t.dtype](ab), t.shape);
  }
  const t0 = process.hrtime.bigint();
  const session = await ort.InferenceSession.create(spec.model, {
    executionProviders: ['cpu'], graphOptimizationLevel: 'all', executionMode: 'sequential',
    intraOpNumThreads: spec.threads, interOpNumThreads: 1,
  });
  const loadMs = ms(t0);
  const t1 = process.hrtime.bigint();
  await session.run(feeds);  // the first run, counted apart (cold start)
  const firstRunMs = ms(t1);
  for (let i = 0; i < spec.warmup; ++i) await session.run(feeds);
  const times = [];
  for (let i = 0; i < spec.runs; ++i) {
    const t = process.hrtime.bigint();
    await session.run(feeds);
    times.push(ms(t));
  }
  times.sort((a, b) => a - b);
  const pick = (q) => times[Math.min(times.length - 1, Math.floor(times.length * q))];
  console.log(JSON.stringify({
    p50_ms: pick(0.5), p90_ms: pick(0.9), min_ms: times[0], load_ms: loadMs, first_run_ms: firstRunMs,
    peak_rss_bytes: peakRss(), baseline_rss_bytes: baselineRss,
  }));
}
main().catch((e) => { console.error(String(e.message || e)); process.exit(1); });
