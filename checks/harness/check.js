// The check program for JavaScript (node), run inside the sandbox: it loads candidate.js (in its working directory)
// as a script of this realm, evaluates each check of checks.json with its own time limit (vm's timeout stops a
// loop), and writes one line per check to the report descriptor, in the Python harness's format (lines that
// Python's ast.literal_eval reads):
//   {"loaded": True} | {"loaded": False, "error": "..."} | {"i": 0, "status": "passed", "got": "..."}
// Values are compared as node's assert.deepStrictEqual does, except that two numbers within 1e-6 (relative) or
// 1e-9 (absolute) of each other are equal, as in the Python harness.
"use strict";
const fs = require("fs");
const util = require("util");
const vm = require("vm");

const report = Number(process.env.REPORT_FD);
const writeSync = fs.writeSync; // taken before the candidate runs: it may replace what it likes
const exit = process.exit.bind(process);
const { checks, limit_ms: limitMs } = JSON.parse(fs.readFileSync("checks.json", "utf8"));
const source = asScript(fs.readFileSync("candidate.js", "utf8"));

// A module's syntax read as a script's, each line where it was: `export` dropped, `import ... from "m"` as require.
function asScript(text) {
  const from = String.raw`\s+from\s+(['"][^'"\n]+['"])\s*;?`;
  return text
    .replace(/^([ \t]*)export[ \t]+(?:default[ \t]+)?(?=(?:async[ \t]+)?function|class|const|let|var)/gm, "$1")
    .replace(/^([ \t]*)export[ \t]*\{[^}\n]*\}[ \t]*;?/gm, "$1")
    .replace(new RegExp(String.raw`^([ \t]*)import\s+(?:\*\s+as\s+)?([\w$]+)` + from, "gm"), "$1const $2 = require($3);")
    .replace(new RegExp(String.raw`^([ \t]*)import\s+\{([^}\n]*)\}` + from, "gm"), (_, pad, names, module) =>
      `${pad}const {${names.replace(/\s+as\s+/g, ": ")}} = require(${module});`);
}

const quote = (text) => JSON.stringify(text); // a JSON string is a Python string literal too
const cut = (text) => (text.length <= 300 ? text : text.slice(0, 297) + "...");
function send(fields) {
  writeSync(report, "{" + fields.map(([key, value]) => `${quote(key)}: ${value}`).join(", ") + "}\n");
}

// What the candidate prints is not the check's answer: it is dropped (a flood of it cannot end the program).
for (const stream of [process.stdout, process.stderr]) stream.write = () => true;
process.exit = (code) => {
  throw new Error(`process.exit(${code === undefined ? "" : code}) was called`);
};
process.on("uncaughtException", () => {}); // a timer or promise of the candidate's failing later decides nothing
process.on("unhandledRejection", () => {});
globalThis.require = require; // the script sees what a CommonJS module would
globalThis.module = { exports: {} };
globalThis.exports = globalThis.module.exports;

function describe(err) {
  if (err && err.code === "ERR_SCRIPT_EXECUTION_TIMEOUT") return null;
  if (!(err instanceof Error)) return "thrown: " + show(err);
  const where = /candidate\.js:(\d+)/.exec(String(err.stack)); // the innermost of the candidate's lines
  return `${err.name}: ${err.message}` + (where ? ` (line ${where[1]})` : "");
}

function show(value, depth = 0) {
  if (typeof value === "string") return quote(value);
  if (typeof value === "bigint") return `${value}n`;
  if (typeof value === "number") return Object.is(value, -0) ? "-0" : String(value);
  if (value === null || typeof value !== "object" || depth > 4) return util.inspect(value, { depth: 0 });
  if (Array.isArray(value)) return "[" + value.slice(0, 50).map((v) => show(v, depth + 1)).join(", ") + "]";
  if (isPlain(value)) {
    const keys = Object.keys(value).slice(0, 50);
    return "{" + keys.map((k) => `${quote(k)}: ${show(value[k], depth + 1)}`).join(", ") + "}";
  }
  return util.inspect(value, { depth: 2, breakLength: Infinity });
}

function isPlain(value) {
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

function close(a, b) {
  if (Object.is(a, b) || a === b) return true;
  if (!Number.isFinite(a) || !Number.isFinite(b)) return false;
  return Math.abs(a - b) <= Math.max(1e-6 * Math.max(Math.abs(a), Math.abs(b)), 1e-9);
}

function same(got, want) {
  if (typeof got === "number" && typeof want === "number") return close(got, want);
  if (Array.isArray(got) && Array.isArray(want)) {
    return got.length === want.length && got.every((g, i) => same(g, want[i]));
  }
  if (got && want && typeof got === "object" && typeof want === "object" && isPlain(got) && isPlain(want)) {
    const keys = Object.keys(got);
    return util.isDeepStrictEqual(keys.sort(), Object.keys(want).sort()) && keys.every((k) => same(got[k], want[k]));
  }
  return util.isDeepStrictEqual(got, want);
}

const run = (code, file) => vm.runInThisContext(code, { filename: file, timeout: limitMs });

async function settle(value) {
  if (!value || typeof value.then !== "function") return value;
  let timer;
  const late = new Promise((_, reject) => {
    timer = setTimeout(() => reject(Object.assign(new Error(), { code: "ERR_SCRIPT_EXECUTION_TIMEOUT" })), limitMs);
  });
  try {
    return await Promise.race([value, late]);
  } finally {
    clearTimeout(timer);
  }
}

async function one(check) {
  try {
    const got = await settle(run(`(${check.expression}\n)`, "check.js"));
    if (check.compare === "truthy") return [got ? "passed" : "failed", show(got)];
    const want = run(`(${check.expected}\n)`, "expected.js");
    return [same(got, want) ? "passed" : "failed", show(got)];
  } catch (err) {
    const what = describe(err);
    return what === null ? ["timeout", `no answer within ${limitMs / 1000} s`] : ["error", what];
  }
}

async function main() {
  try {
    vm.runInThisContext(source, { filename: "candidate.js", timeout: 4 * limitMs });
  } catch (err) {
    const what = describe(err) || `the code did not finish loading within ${(4 * limitMs) / 1000} s`;
    send([["loaded", "False"], ["error", quote(cut(what))]]);
    exit(0);
  }
  send([["loaded", "True"]]);
  for (let i = 0; i < checks.length; i++) {
    const [status, got] = await one(checks[i]);
    send([["i", String(i)], ["status", quote(status)], ["got", quote(cut(got))]]);
  }
  exit(0);
}

main();
