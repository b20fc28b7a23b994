#!/usr/bin/env node
// SPDX-License-Identifier: GPL-2.0-only
//
// ort-run.js: run an ONNX model with ONNX Runtime (onnxruntime-node) the
// way `metainfer run` runs it, as the benchmark peer.
//
//   node tools/bench/ort-run.js MODEL.onnx [--input FILE.npy | -i NAME=FILE.npy]...
//        [--output FILE.npy | -o DIR] [--threads N] [--bench N] [--warmup N]
//        [--seed S]
//
// Session options: graphOptimizationLevel 'all', intraOpNumThreads N,
// interOpNumThreads 1, executionMode 'sequential'.  With --bench N it runs
// --warmup iterations (default 3) and then N timed iterations of
// session.run() on the same input, and prints as its last line
//   latency_ms median=<m> p90=<p> min=<n>
// Without an input it feeds seeded uniform random data of the declared
// shapes (symbolic dimensions become 1).
//
// onnxruntime-node is looked up in $MI_ORT_DIR/node_modules (default
// build/ort/node_modules, installed by `make ort`).

'use strict';

const fs = require('fs');
const path = require('path');

function die(msg) {
	process.stderr.write('ort-run: ' + msg + '\n');
	process.exit(1);
}

function loadOrt() {
	const dirs = [];
	if (process.env.MI_ORT_DIR)
		dirs.push(path.resolve(process.env.MI_ORT_DIR, 'node_modules'));
	dirs.push(path.resolve(__dirname, '../../build/ort/node_modules'));
	dirs.push(path.resolve('build/ort/node_modules'));
	for (const d of dirs) {
		try {
			return require(path.join(d, 'onnxruntime-node'));
		} catch (e) {
			if (e.code !== 'MODULE_NOT_FOUND')
				die('cannot load onnxruntime-node from ' + d + ': ' + e.message);
		}
	}
	die('onnxruntime-node not found (run `make ort`, or set MI_ORT_DIR)');
}

// ---- .npy ---------------------------------------------------------------

const NPY_TYPES = {
	'<f4': { type: 'float32', arr: Float32Array },
	'<f8': { type: 'float64', arr: Float64Array },
	'<i8': { type: 'int64', arr: BigInt64Array },
	'<i4': { type: 'int32', arr: Int32Array },
	'<i2': { type: 'int16', arr: Int16Array },
	'|i1': { type: 'int8', arr: Int8Array },
	'|u1': { type: 'uint8', arr: Uint8Array },
	'|b1': { type: 'bool', arr: Uint8Array },
};

function readNpy(file) {
	let buf;
	try {
		buf = fs.readFileSync(file);
	} catch (e) {
		die(file + ': ' + e.message);
	}
	if (buf.length < 10 || buf.readUInt8(0) !== 0x93 ||
	    buf.toString('latin1', 1, 6) !== 'NUMPY')
		die(file + ': not a .npy file');
	const major = buf.readUInt8(6);
	let hlen, hoff;
	if (major === 1) {
		hlen = buf.readUInt16LE(8);
		hoff = 10;
	} else if (major === 2 || major === 3) {
		if (buf.length < 12)
			die(file + ': truncated .npy header');
		hlen = buf.readUInt32LE(8);
		hoff = 12;
	} else {
		die(file + ': unsupported .npy version ' + major);
	}
	if (hoff + hlen > buf.length)
		die(file + ': truncated .npy header');
	const header = buf.toString('latin1', hoff, hoff + hlen);
	const descr = /'descr'\s*:\s*'([^']*)'/.exec(header);
	const fortran = /'fortran_order'\s*:\s*(True|False)/.exec(header);
	const shape = /'shape'\s*:\s*\(([^)]*)\)/.exec(header);
	if (!descr || !fortran || !shape)
		die(file + ': malformed .npy header');
	if (fortran[1] === 'True')
		die(file + ': fortran_order arrays are not supported');
	const t = NPY_TYPES[descr[1]];
	if (!t)
		die(file + ': unsupported dtype ' + descr[1]);
	const dims = shape[1].split(',').map((s) => s.trim()).filter((s) => s)
		.map(Number);
	const count = dims.reduce((a, b) => a * b, 1);
	const off = hoff + hlen;
	const nbytes = count * t.arr.BYTES_PER_ELEMENT;
	if (buf.length - off < nbytes)
		die(file + ': truncated data (' + (buf.length - off) + ' of ' +
		    nbytes + ' bytes)');
	const data = new t.arr(count);
	new Uint8Array(data.buffer).set(buf.subarray(off, off + nbytes));
	return { type: t.type, dims, data };
}

function writeNpy(file, tensor) {
	const descr = Object.keys(NPY_TYPES).find(
		(k) => NPY_TYPES[k].type === tensor.type);
	if (!descr)
		die('cannot write output of type ' + tensor.type + ' to ' + file);
	const shape = tensor.dims.length === 1 ? '(' + tensor.dims[0] + ',)'
		: '(' + tensor.dims.join(', ') + ')';
	let h = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " +
		shape + ', }';
	const pad = 64 - ((10 + h.length + 1) % 64);
	h += ' '.repeat(pad % 64) + '\n';
	const head = Buffer.alloc(10);
	head.writeUInt8(0x93, 0);
	head.write('NUMPY', 1, 'latin1');
	head.writeUInt8(1, 6);
	head.writeUInt8(0, 7);
	head.writeUInt16LE(h.length, 8);
	const d = tensor.data;
	const body = Buffer.from(d.buffer, d.byteOffset, d.byteLength);
	try {
		fs.writeFileSync(file, Buffer.concat([head, Buffer.from(h, 'latin1'),
						      body]));
	} catch (e) {
		die(file + ': ' + e.message);
	}
}

// ---- seeded random inputs -------------------------------------------------

function mulberry32(seed) {
	let a = seed >>> 0;
	return function () {
		a = (a + 0x6d2b79f5) >>> 0;
		let t = a;
		t = Math.imul(t ^ (t >>> 15), t | 1);
		t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
		return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
	};
}

function randomInput(ort, meta, seed) {
	const dims = (meta.shape || []).map((d) => (typeof d === 'number' && d > 0) ? d : 1);
	const n = dims.reduce((a, b) => a * b, 1);
	const rnd = mulberry32(seed);
	switch (meta.type) {
	case 'float32': {
		const a = new Float32Array(n);
		for (let i = 0; i < n; i++)
			a[i] = rnd() * 2 - 1;
		return new ort.Tensor('float32', a, dims);
	}
	case 'int64': {
		const a = new BigInt64Array(n);
		for (let i = 0; i < n; i++)
			a[i] = BigInt(Math.floor(rnd() * 10));
		return new ort.Tensor('int64', a, dims);
	}
	default:
		die('input ' + meta.name + ': no random data for type ' + meta.type +
		    '; pass it with -i NAME=FILE.npy');
	}
}

// ---- main -----------------------------------------------------------------

function usage() {
	process.stderr.write(
		'usage: ort-run.js MODEL.onnx [--input FILE.npy | -i NAME=FILE.npy]... ' +
		'[--output FILE.npy | -o DIR] [--threads N] [--bench N] [--warmup N] [--seed S]\n');
	process.exit(2);
}

function parseArgs(argv) {
	const a = { model: null, inputs: [], output: null, outdir: null,
		    threads: 1, bench: 0, warmup: 3, seed: 1 };
	const num = (s, name) => {
		if (s === undefined || !/^\d+$/.test(s))
			die(name + ' needs a non-negative integer');
		return Number(s);
	};
	for (let i = 0; i < argv.length; i++) {
		const s = argv[i];
		switch (s) {
		case '--input': a.inputs.push({ name: null, file: argv[++i] }); break;
		case '-i': {
			const v = argv[++i] || '';
			const eq = v.indexOf('=');
			if (eq <= 0)
				die('-i needs NAME=FILE.npy');
			a.inputs.push({ name: v.slice(0, eq), file: v.slice(eq + 1) });
			break;
		}
		case '--output': a.output = argv[++i]; break;
		case '-o': a.outdir = argv[++i]; break;
		case '--threads': a.threads = num(argv[++i], s); break;
		case '--bench': a.bench = num(argv[++i], s); break;
		case '--warmup': a.warmup = num(argv[++i], s); break;
		case '--seed': a.seed = num(argv[++i], s); break;
		case '-h': case '--help': usage(); break;
		default:
			if (s.startsWith('-') || a.model)
				usage();
			a.model = s;
		}
	}
	if (!a.model)
		usage();
	for (const x of a.inputs)
		if (!x.file)
			die('--input/-i needs a file');
	return a;
}

function percentile(sorted, p) {
	const k = Math.max(0, Math.ceil(p * sorted.length) - 1);
	return sorted[Math.min(k, sorted.length - 1)];
}

function median(sorted) {
	const n = sorted.length;
	return n % 2 ? sorted[(n - 1) / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
}

async function main() {
	const a = parseArgs(process.argv.slice(2));
	const ort = loadOrt();
	if (!fs.existsSync(a.model))
		die(a.model + ': no such file');

	const opts = {
		graphOptimizationLevel: 'all',
		intraOpNumThreads: a.threads || 1,
		interOpNumThreads: 1,
		executionMode: 'sequential',
		executionProviders: ['cpu'],
	};
	const t0 = process.hrtime.bigint();
	let sess;
	try {
		sess = await ort.InferenceSession.create(a.model, opts);
	} catch (e) {
		die(a.model + ': ' + String(e.message || e).split('\n')[0]);
	}
	const loadMs = Number(process.hrtime.bigint() - t0) / 1e6;

	const metas = sess.inputMetadata || sess.inputNames.map((n) => ({ name: n }));
	const feeds = {};
	let positional = 0;
	for (const x of a.inputs) {
		const t = readNpy(x.file);
		let name = x.name;
		if (!name) {
			if (positional >= sess.inputNames.length)
				die('more --input files than model inputs');
			name = sess.inputNames[positional++];
		}
		if (!sess.inputNames.includes(name))
			die('model has no input named ' + name);
		feeds[name] = new ort.Tensor(t.type, t.data, t.dims);
	}
	for (let i = 0; i < sess.inputNames.length; i++) {
		const name = sess.inputNames[i];
		if (feeds[name])
			continue;
		const m = metas.find((x) => x.name === name) || {};
		if (!m.type)
			die('input ' + name + ': no input given and no metadata to invent one');
		feeds[name] = randomInput(ort, m, a.seed + i);
	}

	let out;
	try {
		out = await sess.run(feeds);
	} catch (e) {
		die('run: ' + String(e.message || e).split('\n')[0]);
	}
	if (a.output) {
		writeNpy(a.output, out[sess.outputNames[0]]);
	}
	if (a.outdir) {
		fs.mkdirSync(a.outdir, { recursive: true });
		for (const n of sess.outputNames)
			writeNpy(path.join(a.outdir, n.replace(/[^A-Za-z0-9_.-]/g, '_') + '.npy'), out[n]);
	}
	process.stdout.write('model ' + a.model + ' load_ms=' + loadMs.toFixed(1) +
			     ' threads=' + opts.intraOpNumThreads + ' ort=' +
			     (ort.env && ort.env.versions ? ort.env.versions.common : '?') + '\n');

	if (a.bench > 0) {
		for (let i = 0; i < a.warmup; i++)
			await sess.run(feeds);
		const times = [];
		for (let i = 0; i < a.bench; i++) {
			const s = process.hrtime.bigint();
			await sess.run(feeds);
			times.push(Number(process.hrtime.bigint() - s) / 1e6);
		}
		times.sort((x, y) => x - y);
		process.stdout.write('latency_ms median=' + median(times).toFixed(3) +
				     ' p90=' + percentile(times, 0.9).toFixed(3) +
				     ' min=' + times[0].toFixed(3) + '\n');
	}
}

main().catch((e) => die(String(e && e.message ? e.message : e)));
