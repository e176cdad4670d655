#!/usr/bin/env node
// The ONNX Runtime half of tests/bench/compare_seq: the same workloads as seq_bench.c (greedy
// decoding with a KV cache; an encoder over random lengths), the same token ids and lengths
// (the same LCG), the same JSON fields.
//   node seq_ort.js decode PREFILL DECODE [--prompt 32] [--tokens 128] [--threads N] [--seed S]
//   node seq_ort.js varlen ENCODER [--calls 200] [--max-len 512] [--threads N] [--seed S]
// Session options: graph optimisation 'all', sequential execution, intra-op threads as given,
// one inter-op thread.
'use strict';
const fs = require('fs');
const rssMib = () => Number(/VmRSS:\s*(\d+)/.exec(fs.readFileSync('/proc/self/status', 'utf8'))[1]) / 1024;
const rssStart = rssMib();
const ort = require(process.env.ORT_NODE || 'onnxruntime-node');

const M64 = (1n << 64n) - 1n;
let state = 1n;
function nextInt(n) {  // seq_bench.c's LCG
  state = (state * 6364136223846793005n + 1442695040888963407n) & M64;
  return Number((state >> 33n) % BigInt(n));
}

function opts(argv, defaults) {
  const o = Object.assign({}, defaults);
  for (let i = 0; i + 1 < argv.length; i += 2) o[argv[i].replace(/^--/, '').replace('-', '_')] = Number(argv[i + 1]);
  return o;
}

async function open(path, threads) {
  return ort.InferenceSession.create(path, {
    executionProviders: ['cpu'], graphOptimizationLevel: 'all', executionMode: 'sequential',
    intraOpNumThreads: threads, interOpNumThreads: 1,
  });
}

function ms(t0) { return Number(process.hrtime.bigint() - t0) / 1e6; }
function percentile(v, p) {
  const s = [...v].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(p * (s.length - 1) + 0.5))];
}
function lastArgmax(t) {
  const v = t.dims[t.dims.length - 1];
  const x = t.data.subarray(t.data.length - v);
  let best = 0;
  for (let i = 1; i < v; ++i) if (x[i] > x[best]) best = i;
  return best;
}

async function decode(prefillPath, decodePath, o) {
  state = BigInt(o.seed);
  const ps = await open(prefillPath, o.threads);
  const ds = await open(decodePath, o.threads);
  const ids = new BigInt64Array(o.prompt);
  for (let i = 0; i < o.prompt; ++i) ids[i] = BigInt(nextInt(4096));
  const out = await ps.run({ input_ids: new ort.Tensor('int64', ids, [1, o.prompt]) });
  const generated = [lastArgmax(out.logits)];
  const pastNames = ds.inputNames.slice(1);
  let past = pastNames.map((n) => out[n.replace(/^past_/, 'present_')]);
  const lat = [];
  let rssFirst = 0, total = 0;
  for (let step = 0; step < o.tokens; ++step) {
    const feeds = { input_ids: new ort.Tensor('int64', BigInt64Array.of(BigInt(generated[step])), [1, 1]) };
    pastNames.forEach((n, k) => { feeds[n] = past[k]; });
    const t0 = process.hrtime.bigint();
    const r = await ds.run(feeds);
    lat.push(ms(t0));
    total += lat[step];
    past = pastNames.map((n) => r[n.replace(/^past_/, 'present_')]);
    generated.push(lastArgmax(r.logits));
    if (step === 0) rssFirst = rssMib();
  }
  return {
    engine: 'onnxruntime', mode: 'decode', threads: o.threads, prompt: o.prompt, steps: o.tokens,
    tokens_per_s: o.tokens / (total / 1e3), p50_ms: percentile(lat, 0.5), p90_ms: percentile(lat, 0.9),
    rss_start_mib: rssStart, rss_first_step_mib: rssFirst, rss_end_mib: rssMib(), tokens: generated,
  };
}

async function varlen(path, o) {
  state = BigInt(o.seed);
  const s = await open(path, o.threads);
  const lat = [];
  let rss20 = 0, checksum = 0;
  for (let c = 0; c < o.calls; ++c) {
    const len = 1 + nextInt(o.max_len);
    const ids = new BigInt64Array(len), mask = new BigInt64Array(len);
    for (let j = 0; j < len; ++j) { ids[j] = BigInt(nextInt(8192)); mask[j] = 1n; }
    const t0 = process.hrtime.bigint();
    const r = await s.run({ input_ids: new ort.Tensor('int64', ids, [1, len]),
                            attention_mask: new ort.Tensor('int64', mask, [1, len]) });
    lat.push(ms(t0));
    checksum += r[s.outputNames[0]].data[0];
    if (c === 19) rss20 = rssMib();
  }
  return {
    engine: 'onnxruntime', mode: 'varlen', threads: o.threads, calls: o.calls,
    p50_ms: percentile(lat, 0.5), p90_ms: percentile(lat, 0.9), rss_start_mib: rssStart,
    rss_20_mib: rss20, rss_end_mib: rssMib(), checksum,
  };
}

async function main() {
  const [mode, ...rest] = process.argv.slice(2);
  let result;
  if (mode === 'decode') {
    result = await decode(rest[0], rest[1], opts(rest.slice(2), { prompt: 32, tokens: 128, threads: 1, seed: 1 }));
  } else if (mode === 'varlen') {
    result = await varlen(rest[0], opts(rest.slice(1), { calls: 200, max_len: 512, threads: 1, seed: 1 }));
  } else {
    throw new Error('usage: seq_ort.js decode PREFILL DECODE [...] | varlen ENCODER [...]');
  }
  console.log(JSON.stringify(result));
}
main().catch((e) => { console.error(String(e.message || e)); process.exit(1); });
