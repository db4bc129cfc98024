// devtools_check.mjs — loads a Chrome Trace Event Format file in the Chrome DevTools trace engine
// (npm @paulirish/trace_engine, pinned 0.0.65) and prints, as one JSON object on stdout, what the engine
// understood: the threads it placed entries on, the flows it joined and the trace bounds.
//
//   node devtools_check.mjs TRACE.json     (or TRACE.json.gz)
//
// The engine is loaded from $OPSCOPE_TRACE_ENGINE_DIR/node_modules/@paulirish/trace_engine, by default
// <repo>/.cache/trace-consumers (scripts/install-deps.sh installs it there). Exit status 1, with a message
// on stderr, when the file cannot be read or parsed or the engine throws; 2 on a usage error.
//
// Output:
//   {
//     "engine": "@paulirish/trace_engine@0.0.65",
//     "events": 8,                         // entries of traceEvents given to the engine
//     "generic": true,                     // parsedTrace.data.Meta.traceIsGeneric (not a browser recording)
//     "bounds": {"min": 12.345, "max": 35.375, "range": 23.03},        // µs, Meta.traceBounds
//     "threads": [                         // sorted by pid, then tid
//       {"pid": 100, "tid": 1, "process_name": "host", "thread_name": "main",
//        "entries": 1,                     // trace entries the engine placed on the thread
//        "roots": 1, "max_depth": 1,       // top-level entries and nesting depth of its entry tree
//        "tree_nodes": 1,                  // entries in the tree (one that partly overlaps another is left out)
//        "names": {"conv2d_forward": 1}}   // entry name -> count
//     ],
//     "flows": [                           // each flow: the events it joined, in time order
//       [[100, 1, 12.345, "conv2d_forward", "mlu_op"], [1000000000, 7, 30.125, "conv2d_forward", "mlu_op"]]
//     ]
//   }
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import {fileURLToPath, pathToFileURL} from 'node:url';

const ENGINE = '@paulirish/trace_engine';

function fail(message, status = 1) {
  process.stderr.write(`devtools_check: ${message}\n`);
  process.exit(status);
}

const argv = process.argv.slice(2);
if (argv.length !== 1 || argv[0] === '--help' || argv[0] === '-h') {
  const text = 'usage: node devtools_check.mjs TRACE.json';
  if (argv.length === 1) {
    process.stdout.write(`${text}\n`);
    process.exit(0);
  }
  fail(text, 2);
}
const tracePath = argv[0];

const scriptDir = path.dirname(fileURLToPath(import.meta.url));
const repoRoot = path.resolve(scriptDir, '..', '..');
const engineDir = process.env.OPSCOPE_TRACE_ENGINE_DIR || path.join(repoRoot, '.cache', 'trace-consumers');
const packageDir = path.join(engineDir, 'node_modules', ...ENGINE.split('/'));
const analyzeModule = path.join(packageDir, 'analyze-trace.mjs');
if (!fs.existsSync(analyzeModule)) {
  fail(`${ENGINE} is not installed in ${engineDir} (run scripts/install-deps.sh, or ` +
       `npm install --prefix ${engineDir} ${ENGINE}@0.0.65)`);
}

let traceEvents;
try {
  // OP_TRACE_GZIP's trace.json.gz: inflated first (as far as it goes, for a killed run's file).
  const raw = fs.readFileSync(tracePath);
  const text = /\.gz(\.tmp)?$/.test(tracePath) ?
      zlib.gunzipSync(raw, {finishFlush: zlib.constants.Z_SYNC_FLUSH}).toString('utf8') :
      raw.toString('utf8');
  const json = JSON.parse(text);
  traceEvents = Array.isArray(json) ? json : json?.traceEvents;
} catch (e) {
  fail(`${tracePath}: ${e.message}`);
}
if (!Array.isArray(traceEvents)) fail(`${tracePath}: no traceEvents array`);

let version = 'unknown';
try {
  version = JSON.parse(fs.readFileSync(path.join(packageDir, 'package.json'), 'utf8')).version;
} catch {
  // the version is informational only
}

// The engine logs (e.g. mismatched B/E events) with console.*; keep stdout for the summary alone.
for (const method of ['log', 'info', 'debug', 'warn']) {
  console[method] = (...args) => console.error(...args);
}

let parsedTrace;
try {
  const {analyzeEvents} = await import(pathToFileURL(analyzeModule).href);
  ({parsedTrace} = await analyzeEvents(traceEvents));
} catch (e) {
  fail(`${tracePath}: the trace engine failed: ${e?.stack ?? e}`);
}

const data = parsedTrace.data;
const processNames = data.Meta.processNames;  // Map pid -> process_name event
const threadNames = data.Meta.threadsInProcess;  // Map pid -> Map tid -> thread_name event

const threads = [];
for (const [pid, proc] of data.Renderer.processes) {
  for (const [tid, thread] of proc.threads) {
    let treeNodes = 0;
    const pending = [...(thread.tree?.roots ?? [])];
    while (pending.length > 0) {
      const node = pending.pop();
      ++treeNodes;
      for (const child of node.children ?? []) pending.push(child);
    }
    const names = {};
    for (const entry of thread.entries) names[entry.name] = (names[entry.name] ?? 0) + 1;
    threads.push({
      pid,
      tid,
      process_name: processNames.get(pid)?.args?.name ?? null,
      thread_name: threadNames.get(pid)?.get(tid)?.args?.name ?? null,
      entries: thread.entries.length,
      roots: thread.tree?.roots?.size ?? 0,
      max_depth: thread.tree?.maxDepth ?? 0,
      tree_nodes: treeNodes,
      names,
    });
  }
}
threads.sort((a, b) => a.pid - b.pid || a.tid - b.tid);

const flows = data.Flows.flows.map(
    flow => flow.map(event => [event.pid, event.tid, event.ts, event.name, event.cat ?? null]));

const bounds = data.Meta.traceBounds;
const summary = {
  engine: `${ENGINE}@${version}`,
  events: traceEvents.length,
  generic: data.Meta.traceIsGeneric,
  bounds: {min: bounds.min, max: bounds.max, range: bounds.range},
  threads,
  flows,
};
process.stdout.write(`${JSON.stringify(summary)}\n`);
