'use strict';
// Loads one trace file into Perfetto's trace processor and prints what it made of the file
// as one JSON line (see README.md for the fields and the exit codes).
//
// The trace processor is the WebAssembly build that the Perfetto UI runs in a Web Worker:
// `trace_processor.wasm` plus `engine_bundle.js`, the worker script (Emscripten's loader and
// the UI's bridge between a MessagePort and the wasm). setup.sh fetches both and checks them
// against pinned digests. Here the worker script runs inside a function whose parameters
// stand in for the browser globals it expects, and this file talks to it over a stand-in
// MessagePort in the trace processor's RPC protocol (protobuf messages, encoded and decoded
// by the few lines below). Node's standard library is all it needs.

const fs = require('fs');
const path = require('path');

// ---------------------------------------------------------------------------------------
// Protobuf wire format, as far as the RPC needs it.

const WIRE_VARINT = 0;
const WIRE_I64 = 1;
const WIRE_LEN = 2;
const WIRE_I32 = 5;

/** Appends protobuf fields to a list of buffers. */
class ProtoWriter {
  constructor() {
    this.chunks = [];
  }

  static varintBytes(value) {
    const out = [];
    let v = BigInt.asUintN(64, BigInt(value));
    do {
      let byte = Number(v & 0x7fn);
      v >>= 7n;
      if (v !== 0n) byte |= 0x80;
      out.push(byte);
    } while (v !== 0n);
    return Buffer.from(out);
  }

  key(field, wire) {
    this.chunks.push(ProtoWriter.varintBytes((field << 3) | wire));
    return this;
  }

  uint(field, value) {
    this.key(field, WIRE_VARINT);
    this.chunks.push(ProtoWriter.varintBytes(value));
    return this;
  }

  bytes(field, buffer) {
    this.key(field, WIRE_LEN);
    this.chunks.push(ProtoWriter.varintBytes(buffer.length), buffer);
    return this;
  }

  string(field, text) {
    return this.bytes(field, Buffer.from(text, 'utf8'));
  }

  finish() {
    return Buffer.concat(this.chunks);
  }
}

/** Reads the fields of one protobuf message. Varints come back as BigInt. */
class ProtoReader {
  constructor(buffer) {
    this.buf = buffer;
    this.pos = 0;
  }

  /** The next varint, or null when the buffer ends inside it. */
  varint() {
    let result = 0n;
    let shift = 0n;
    while (this.pos < this.buf.length) {
      const byte = this.buf[this.pos++];
      result |= BigInt(byte & 0x7f) << shift;
      if ((byte & 0x80) === 0) return result;
      shift += 7n;
      if (shift > 70n) throw new Error('varint longer than 10 bytes');
    }
    return null;
  }

  *fields() {
    while (this.pos < this.buf.length) {
      const key = this.varint();
      if (key === null) throw new Error('message ends inside a field key');
      const field = Number(key >> 3n);
      const wire = Number(key & 7n);
      let value;
      if (wire === WIRE_VARINT) {
        value = this.varint();
        if (value === null) throw new Error(`message ends inside field ${field}`);
      } else if (wire === WIRE_LEN || wire === WIRE_I64 || wire === WIRE_I32) {
        let length = 8;
        if (wire === WIRE_I32) length = 4;
        if (wire === WIRE_LEN) {
          const declared = this.varint();
          if (declared === null) throw new Error(`message ends inside the length of field ${field}`);
          length = Number(declared);
        }
        if (this.pos + length > this.buf.length) throw new Error(`field ${field} runs past the message`);
        value = this.buf.subarray(this.pos, this.pos + length);
        this.pos += length;
      } else {
        throw new Error(`unsupported wire type ${wire} in field ${field}`);
      }
      yield { field, wire, value };
    }
  }
}

/** The values of a repeated varint field, packed (one buffer) or not (one BigInt). */
function varintList(entry) {
  if (entry.wire !== WIRE_LEN) return [entry.value];
  const reader = new ProtoReader(entry.value);
  const out = [];
  while (reader.pos < entry.value.length) out.push(reader.varint());
  return out;
}

/** The values of a repeated double field, packed or not. */
function doubleList(entry) {
  const b = entry.value;
  const out = [];
  for (let off = 0; off + 8 <= b.length; off += 8) out.push(b.readDoubleLE(off));
  return out;
}

/** A BigInt as a Number when that is exact, else as its decimal text. */
function plainNumber(big) {
  const n = Number(big);
  return Number.isSafeInteger(n) ? n : big.toString();
}

// ---------------------------------------------------------------------------------------
// The trace processor's RPC (protos/perfetto/trace_processor/trace_processor.proto).

const Method = { APPEND_TRACE_DATA: 1, FINALIZE_TRACE_DATA: 2, QUERY_STREAMING: 3, GET_STATUS: 10 };
// Fields of TraceProcessorRpc.
const Rpc = {
  SEQ: 1, REQUEST: 2, INVALID_REQUEST: 4, FATAL_ERROR: 5,
  APPEND_ARGS: 101, QUERY_ARGS: 103,
  APPEND_RESULT: 201, QUERY_RESULT: 203, STATUS: 210, FINALIZE_RESULT: 212,
};
// CellsBatch.CellType.
const Cell = { NULL: 1, VARINT: 2, FLOAT64: 3, STRING: 4, BLOB: 5 };

/** Pulls the `error` string (field `errorField`) out of a small result message. */
function errorOf(message, errorField) {
  for (const f of new ProtoReader(message).fields()) {
    if (f.field === errorField) return f.value.toString('utf8');
  }
  return null;
}

function decodeReply(bytes) {
  const reply = {};
  for (const f of new ProtoReader(bytes).fields()) {
    switch (f.field) {
      case Rpc.INVALID_REQUEST: reply.invalidRequest = Number(f.value); break;
      case Rpc.FATAL_ERROR: reply.fatalError = f.value.toString('utf8'); break;
      case Rpc.APPEND_RESULT: reply.appendError = errorOf(f.value, 2); break;
      case Rpc.FINALIZE_RESULT: reply.finalizeError = errorOf(f.value, 1); break;
      case Rpc.QUERY_RESULT: (reply.queryResults ||= []).push(f.value); break;
      case Rpc.STATUS:
        for (const s of new ProtoReader(f.value).fields()) {
          if (s.field === 2) reply.version = s.value.toString('utf8');
        }
        break;
      default: break;
    }
  }
  return reply;
}

/** Adds the rows of one QueryResult message to `table` ({columns, rows, error}). */
function addQueryResult(table, bytes) {
  for (const f of new ProtoReader(bytes).fields()) {
    if (f.field === 1) table.columns.push(f.value.toString('utf8'));
    else if (f.field === 2) table.error = f.value.toString('utf8');
    else if (f.field === 3) addBatch(table, f.value);
  }
}

function addBatch(table, bytes) {
  const kinds = [];
  const varints = [];
  const doubles = [];
  const strings = [];
  const blobs = [];
  for (const f of new ProtoReader(bytes).fields()) {
    if (f.field === 1) kinds.push(...varintList(f).map(Number));
    else if (f.field === 2) varints.push(...varintList(f).map(v => BigInt.asIntN(64, v)));
    else if (f.field === 3) doubles.push(...doubleList(f));
    else if (f.field === 4) blobs.push(Buffer.from(f.value).toString('base64'));
    // All the batch's strings in one field, each ended by a NUL.
    else if (f.field === 5) strings.push(...f.value.toString('utf8').split('\0').slice(0, -1));
  }
  const next = { [Cell.VARINT]: 0, [Cell.FLOAT64]: 0, [Cell.STRING]: 0, [Cell.BLOB]: 0 };
  const width = table.columns.length;
  let row = [];
  for (const kind of kinds) {
    let value;
    if (kind === Cell.NULL) value = null;
    else if (kind === Cell.VARINT) value = plainNumber(varints[next[kind]++]);
    else if (kind === Cell.FLOAT64) value = doubles[next[kind]++];
    else if (kind === Cell.STRING) value = strings[next[kind]++];
    else if (kind === Cell.BLOB) value = blobs[next[kind]++];
    else throw new Error(`unknown cell type ${kind}`);
    row.push(value);
    if (row.length === width) {
      table.rows.push(Object.fromEntries(table.columns.map((name, i) => [name, row[i]])));
      row = [];
    }
  }
}

// ---------------------------------------------------------------------------------------
// Running the UI's worker script under Node.

/**
 * True for the tiny module the worker script compiles to learn whether this runtime has
 * 64-bit wasm memories: a wasm header whose first section declares one memory with the
 * memory64 flag. Refusing it keeps the script on the 32-bit trace_processor.wasm, the only
 * build setup.sh fetches (Node 20 cannot compile the 64-bit one anyway).
 */
function isMemory64Probe(bytes) {
  const MEMORY_SECTION = 5;
  const MEMORY64_FLAG = 0x04;
  return bytes.length < 64 && bytes[8] === MEMORY_SECTION && bytes[10] === 1 &&
    (bytes[11] & MEMORY64_FLAG) !== 0;
}

/** A stand-in for the browser's WebAssembly namespace that refuses the memory64 probe. */
function wasmWithoutMemory64() {
  const wasm = Object.create(WebAssembly);
  wasm.Module = function Module(source) {
    const view = ArrayBuffer.isView(source)
      ? new Uint8Array(source.buffer, source.byteOffset, source.byteLength)
      : new Uint8Array(source);
    if (isMemory64Probe(view)) throw new WebAssembly.CompileError('memory64 is not offered here');
    return new WebAssembly.Module(source);
  };
  return wasm;
}

/**
 * Evaluates engine_bundle.js as a worker would, and returns the worker's global object (on
 * which the script sets `onmessage`) and the lines the engine logged.
 */
function startWorker(uiDir) {
  const script = fs.readFileSync(path.join(uiDir, 'engine_bundle.js'), 'utf8');
  const log = [];
  const keep = (...parts) => log.push(parts.join(' '));
  const location = { href: `file://${uiDir}/engine_bundle.js`, protocol: 'file:', host: '' };
  const workerGlobal = { location };

  // Emscripten, in a worker, loads the wasm with a synchronous XMLHttpRequest.
  class FileRequest {
    open(_method, url, isAsync) {
      if (isAsync !== false) throw new Error('perfetto-check serves synchronous requests only');
      this.file = path.join(uiDir, path.basename(new URL(url, location.href).pathname));
    }
    send() {
      const data = fs.readFileSync(this.file);
      this.response = data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength);
      this.status = 200;
    }
  }

  // What the script sees instead of Node's globals: no `process` or `window`, so the
  // Emscripten loader takes its worker path.
  const globals = {
    self: workerGlobal,
    WorkerGlobalScope: class WorkerGlobalScope {},
    XMLHttpRequest: FileRequest,
    WebAssembly: wasmWithoutMemory64(),
    location,
    console: { log: keep, info: keep, warn: keep, error: keep, debug() {} },
    process: undefined,
    window: undefined,
    document: undefined,
    importScripts: undefined,
  };
  const run = new Function(...Object.keys(globals), script);
  run(...Object.values(globals));
  if (typeof workerGlobal.onmessage !== 'function') {
    throw new Error('engine_bundle.js did not set a message handler');
  }
  return { workerGlobal, log };
}

/** A trace processor to call synchronously: each request's replies come back at once. */
class TraceProcessor {
  constructor(uiDir) {
    const { workerGlobal, log } = startWorker(uiDir);
    this.workerGlobal = workerGlobal;
    this.log = log;
    this.seq = 0;
    this.inbox = Buffer.alloc(0);
    this.replies = [];
    this.port = {
      onmessage: null,
      postMessage: data => this.receive(Buffer.from(data)),
    };
  }

  /** Hands the port to the worker once its wasm is up; returns the processor's version. */
  async connect() {
    // The wasm is compiled synchronously, and its runtime comes up in promise callbacks;
    // a turn of the event loop lets them all run before the first request.
    await new Promise(resolve => setImmediate(resolve));
    this.workerGlobal.onmessage({ data: this.port });
    const version = this.call(Method.GET_STATUS).map(r => r.version).find(Boolean);
    if (!version) throw new Error('the trace processor did not report its status');
    return version;
  }

  /** Splits the reply stream (TraceProcessorRpcStream: repeated field 1) into messages. */
  receive(bytes) {
    this.inbox = this.inbox.length ? Buffer.concat([this.inbox, bytes]) : bytes;
    for (;;) {
      const reader = new ProtoReader(this.inbox);
      const key = reader.varint();
      if (key === null) return;
      if (key !== BigInt((1 << 3) | WIRE_LEN)) throw new Error(`unexpected reply stream key ${key}`);
      const length = reader.varint();
      if (length === null || reader.pos + Number(length) > this.inbox.length) return;
      const end = reader.pos + Number(length);
      this.replies.push(decodeReply(this.inbox.subarray(reader.pos, end)));
      this.inbox = this.inbox.subarray(end);
    }
  }

  call(method, argsField, args) {
    const rpc = new ProtoWriter().uint(Rpc.SEQ, ++this.seq).uint(Rpc.REQUEST, method);
    if (argsField) rpc.bytes(argsField, args);
    const frame = new ProtoWriter().bytes(1, rpc.finish()).finish();
    this.replies = [];
    this.port.onmessage({ data: new Uint8Array(frame.buffer, frame.byteOffset, frame.length) });
    const replies = this.replies;
    this.replies = [];
    for (const r of replies) {
      if (r.fatalError) throw new Error(`trace processor fatal error: ${r.fatalError}`);
      if (r.invalidRequest) throw new Error(`trace processor refused method ${r.invalidRequest}`);
    }
    return replies;
  }

  /** Feeds the trace; returns the processor's error text, or null. */
  append(bytes) {
    const found = this.call(Method.APPEND_TRACE_DATA, Rpc.APPEND_ARGS, bytes).find(r => r.appendError);
    return found ? found.appendError : null;
  }

  finalize() {
    const found = this.call(Method.FINALIZE_TRACE_DATA).find(r => r.finalizeError);
    return found ? found.finalizeError : null;
  }

  /** Runs `sql`; returns its rows as objects, or throws the processor's error. */
  query(sql) {
    const args = new ProtoWriter().string(1, sql).finish();
    const table = { columns: [], rows: [], error: null };
    for (const r of this.call(Method.QUERY_STREAMING, Rpc.QUERY_ARGS, args)) {
      for (const result of r.queryResults || []) addQueryResult(table, result);
    }
    if (table.error) throw new Error(`query \`${sql}\` failed: ${table.error}`);
    return table.rows;
  }
}

// ---------------------------------------------------------------------------------------
// Checks of our own.

/**
 * For a protobuf trace (a run of `Trace.packet` fields): the number of bytes at its end
 * that do not make up a whole field, 0 when it ends cleanly. The trace processor drops such
 * a tail without a word, so a truncated `.pftrace` would otherwise pass.
 */
function incompleteTail(data) {
  const reader = new ProtoReader(data);
  while (reader.pos < data.length) {
    const start = reader.pos;
    const key = reader.varint();
    if (key === null) return data.length - start;
    const wire = Number(key & 7n);
    let skip;
    if (wire === WIRE_VARINT) {
      if (reader.varint() === null) return data.length - start;
      skip = 0;
    } else if (wire === WIRE_I64) {
      skip = 8;
    } else if (wire === WIRE_I32) {
      skip = 4;
    } else if (wire === WIRE_LEN) {
      const length = reader.varint();
      if (length === null) return data.length - start;
      skip = Number(length);
    } else {
      return data.length - start;
    }
    if (reader.pos + skip > data.length) return data.length - start;
    reader.pos += skip;
  }
  return 0;
}

// ---------------------------------------------------------------------------------------

const APPEND_CHUNK_BYTES = 16 << 20;
const COUNTED_TABLES = ['slice', 'counter', 'flow', 'thread', 'process'];
const KEY_OF_TABLE = { slice: 'slices', counter: 'counters', flow: 'flows', thread: 'threads', process: 'processes' };

async function check(file, uiDir, verbose) {
  const data = fs.readFileSync(file);
  const tp = new TraceProcessor(uiDir);
  const version = await tp.connect();
  const errors = [];
  const problem = (name, value, severity) => errors.push({ name, value, severity });

  if (data.length === 0) problem('checker_empty_file', 0, 'checker');
  // 0x0a: the key of `Trace.packet`, the first byte of every protobuf trace.
  if (data.length > 0 && data[0] === 0x0a) {
    const tail = incompleteTail(data);
    if (tail > 0) problem('checker_truncated_proto_packet', tail, 'checker');
  }

  let refused = false;
  for (let off = 0; off < data.length && !refused; off += APPEND_CHUNK_BYTES) {
    const error = tp.append(data.subarray(off, off + APPEND_CHUNK_BYTES));
    if (error) {
      problem('append_trace_data_error', error, 'fatal');
      refused = true;
    }
  }
  const finalizeError = tp.finalize();
  if (finalizeError) {
    problem('finalize_trace_data_error', finalizeError, 'fatal');
    refused = true;
  }

  // A refused trace has no tables to count.
  const scalar = sql => {
    if (refused) return null;
    try {
      const rows = tp.query(sql);
      return rows.length ? Object.values(rows[0])[0] : null;
    } catch (e) {
      problem('query_error', e.message, 'checker');
      return null;
    }
  };
  const report = {};
  for (const table of COUNTED_TABLES) report[KEY_OF_TABLE[table]] = scalar(`select count(*) from ${table}`);
  report.errors = errors;

  const stats = severities =>
    tp.query(`select name, idx, severity, value from stats where value > 0 and severity in (${severities}) order by name, idx`);
  for (const row of stats("'error', 'data_loss'")) {
    const entry = { name: row.name, value: row.value, severity: row.severity };
    if (row.idx !== null) entry.idx = row.idx;
    errors.push(entry);
  }

  if (verbose) {
    report.trace_processor_version = version;
    report.bytes = data.length;
    // Begun and never ended: no Perfetto error, but nearly always a writer's mistake.
    report.incomplete_slices = scalar('select count(*) from slice where dur = -1');
    report.info_stats = stats("'info'");
    report.engine_log = tp.log.map(line => line.trim()).filter(Boolean);
  }
  return report;
}

function usage(message) {
  process.stderr.write(`perfetto-check: ${message}\n` +
    'usage: OMNIPROF_PERFETTO_UI_DIR=DIR node load.js [--verbose] TRACE_FILE\n');
  process.exit(2);
}

async function main() {
  const args = process.argv.slice(2);
  const verbose = args.includes('--verbose');
  const unknown = args.filter(a => a.startsWith('--') && a !== '--verbose');
  const files = args.filter(a => !a.startsWith('--'));
  if (unknown.length) usage(`unknown option ${unknown[0]}`);
  if (files.length !== 1) usage('give exactly one trace file');
  const uiDir = process.env.OMNIPROF_PERFETTO_UI_DIR;
  if (!uiDir) usage('OMNIPROF_PERFETTO_UI_DIR is not set');
  if (!fs.existsSync(files[0])) usage(`no such file: ${files[0]}`);
  const report = await check(files[0], path.resolve(uiDir), verbose);
  process.stdout.write(`${JSON.stringify(report)}\n`);
  process.exit(report.errors.length ? 1 : 0);
}

if (require.main === module) {
  main().catch(e => {
    process.stderr.write(`perfetto-check: ${(e && e.stack) || e}\n`);
    process.exit(3);
  });
}

module.exports = { TraceProcessor, incompleteTail };
