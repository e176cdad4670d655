#!/usr/bin/env node
// Runs one ONNX model on ONNX Runtime's CPU provider at a given graph optimisation level and
// writes its outputs as raw little-endian files (tests/models/quantize.py: ONNX Runtime's
// int8 kernels, level 'all', against its float QuantizeLinear/DequantizeLinear ops, 'basic').
//   node ort_outputs.js SPEC.json OUT_DIR
// SPEC: {"model", "optimization": "basic" | "extended" | "all" | "disabled",
//        "inputs": [{"name", "dtype", "shape", "file"}]}  (files relative to SPEC)
// Writes OUT_DIR/outputs.json: [{"name", "dtype", "shape", "file"}] in the model's output order.
// Needs onnxruntime-node: ORT_NODE names its package folder, or require() resolves it.
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require(process.env.ORT_NODE || 'onnxruntime-node');

const ARRAYS = {
  float32: Float32Array, float64: Float64Array, int64: BigInt64Array, int32: Int32Array,
  int16: Int16Array, int8: Int8Array, uint8: Uint8Array, uint16: Uint16Array, bool: Uint8Array,
};

async function main() {
  const [specPath, outDir] = process.argv.slice(2);
  const spec = JSON.parse(fs.readFileSync(specPath));
  const base = path.dirname(specPath);
  const feeds = {};
  for (const t of spec.inputs) {
    const buf = fs.readFileSync(path.resolve(base, t.file));
    const ab = buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength);
    feeds[t.name] = new ort.Tensor(t.dtype, new ARRAYS[t.dtype](ab), t.shape);
  }
  const session = await ort.InferenceSession.create(path.resolve(base, spec.model), {
    executionProviders: ['cpu'], intraOpNumThreads: 1,
    graphOptimizationLevel: spec.optimization || 'basic',
  });
  const out = await session.run(feeds);
  fs.mkdirSync(outDir, { recursive: true });
  const written = [];
  session.outputNames.forEach((name, i) => {
    const t = out[name];
    const file = `output_${i}.bin`;
    const bytes = Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength);
    fs.writeFileSync(path.join(outDir, file), bytes);
    written.push({ name, dtype: t.type, shape: t.dims, file });
  });
  fs.writeFileSync(path.join(outDir, 'outputs.json'), JSON.stringify(written, null, 1));
}
main().catch((e) => { console.error(String(e.message || e)); process.exit(1); });
