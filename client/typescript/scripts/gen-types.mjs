// Generates the protocol's TypeScript types from protocol/schemas at build
// time, so they cannot drift from the schemas the daemon's traffic is
// tested against (tests/test_wire_schemas.py).
//
//   node scripts/gen-types.mjs SCHEMA_DIR OUT.ts
//
// Every $defs entry becomes an exported type named in PascalCase. The
// method maps come from the `method` enums: request.schema.json must hold
// $defs/<method>Params and response.schema.json $defs/<method>Result for
// each request method, notification.schema.json $defs/<method>Params for
// each notification; a missing one fails the build. Only the keywords the
// schemas use for shapes are mapped; validation-only ones (if/then,
// pattern, minimum, ...) do not change a TypeScript type.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const [dir, out] = process.argv.slice(2);
if (!dir || !out) {
  console.error("usage: gen-types.mjs SCHEMA_DIR OUT.ts");
  process.exit(2);
}

const files = ["tooldef", "request", "response", "notification", "error"];
// The type of a whole file, where one is wanted. Notification is the union
// of the per-method shapes, made below from the method map.
const rootNames = { tooldef: "ToolDef", notification: "Notification" };
const docs = Object.fromEntries(
  files.map((f) => [f, JSON.parse(readFileSync(join(dir, f + ".schema.json"), "utf8"))]),
);

function fail(msg) {
  console.error("gen-types: " + msg);
  process.exit(1);
}

function pascal(name) {
  return name
    .split(/[_\-]/)
    .map((p) => p.charAt(0).toUpperCase() + p.slice(1))
    .join("");
}

// The type name a $ref points at, seen from file `from`.
function refName(ref, from) {
  const [file, frag = ""] = ref.split("#");
  const target = file === "" ? from : file.replace(/\.schema\.json$/, "");
  if (!(target in docs)) fail(`${from}: $ref to unknown file ${ref}`);
  if (frag === "" || frag === "/") {
    if (!(target in rootNames)) fail(`${from}: $ref to the root of ${target}, which has no type`);
    return rootNames[target];
  }
  const m = /^\/\$defs\/([A-Za-z0-9_]+)$/.exec(frag);
  if (!m || !(m[1] in (docs[target].$defs ?? {}))) fail(`${from}: unresolved $ref ${ref}`);
  return pascal(m[1]);
}

const literal = (v) => JSON.stringify(v);
const union = (ts) => [...new Set(ts)].join(" | ") || "never";
const propKey = (k) => (/^[A-Za-z_$][A-Za-z0-9_$]*$/.test(k) ? k : literal(k));

function doc(s, indent) {
  return typeof s === "object" && s !== null && typeof s.description === "string"
    ? `${indent}/** ${s.description.replace(/\*\//g, "*\\/")} */\n`
    : "";
}

// The TypeScript type of schema s, found in file `from`.
function typeOf(s, from, indent = "") {
  if (s === true || s === undefined) return "unknown";
  if (s === false) return "never";
  const parts = [];
  for (const sub of s.allOf ?? []) {
    // if/then members only validate; a $ref or shape member narrows.
    if (sub.if === undefined) parts.push(typeOf(sub, from, indent));
  }
  parts.push(ownType(s, from, indent));
  const kept = parts.filter((p) => p !== "unknown");
  if (kept.length === 0) return "unknown";
  return kept.length === 1 ? kept[0] : kept.map((p) => (p.includes("|") ? `(${p})` : p)).join(" & ");
}

function ownType(s, from, indent) {
  if (s.$ref !== undefined) return refName(s.$ref, from);
  if ("const" in s) return literal(s.const);
  if (s.enum !== undefined) return union(s.enum.map(literal));
  const alts = s.anyOf ?? s.oneOf;
  if (alts !== undefined) return union(alts.map((a) => typeOf(a, from, indent)));
  if (s.type === undefined) return s.properties !== undefined ? objectType(s, from, indent) : "unknown";
  const types = Array.isArray(s.type) ? s.type : [s.type];
  return union(types.map((t) => simpleType(t, s, from, indent)));
}

function simpleType(t, s, from, indent) {
  switch (t) {
    case "string":
      return "string";
    case "integer":
    case "number":
      return "number";
    case "boolean":
      return "boolean";
    case "null":
      return "null";
    case "array": {
      const item = s.items === undefined ? "unknown" : typeOf(s.items, from, indent);
      return item.includes(" ") ? `Array<${item}>` : `${item}[]`;
    }
    case "object":
      return objectType(s, from, indent);
    default:
      return fail(`unknown type ${t}`);
  }
}

function objectType(s, from, indent) {
  const inner = indent + "  ";
  const req = new Set(s.required ?? []);
  const lines = [];
  for (const [k, v] of Object.entries(s.properties ?? {})) {
    lines.push(`${doc(v, inner)}${inner}${propKey(k)}${req.has(k) ? "" : "?"}: ${typeOf(v, from, inner)};`);
  }
  const extra = s.additionalProperties;
  if (extra !== false) {
    // Open objects (and open maps such as env) take any further member.
    lines.push(`${inner}[member: string]: ${extra === undefined || extra === true ? "unknown" : typeOf(extra, from, inner)};`);
  }
  return lines.length === 0 ? "Record<string, never>" : `{\n${lines.join("\n")}\n${indent}}`;
}

const outLines = [
  "// Generated by scripts/gen-types.mjs from protocol/schemas/*.schema.json",
  "// at build time. Do not edit: change the schemas.",
  "/* eslint-disable */",
  "",
];
const seen = new Map();
function emit(name, s, from) {
  const body = typeOf(s, from);
  if (seen.has(name)) {
    if (seen.get(name) !== body) fail(`${name} is defined differently in two schemas`);
    return;
  }
  seen.set(name, body);
  outLines.push(`${doc(s, "")}export type ${name} = ${body};`, "");
}

for (const f of files) {
  if (f in rootNames && f !== "notification") emit(rootNames[f], docs[f], f);
  for (const [k, v] of Object.entries(docs[f].$defs ?? {})) emit(pascal(k), v, f);
}

function methodMap(title, methods, fn) {
  outLines.push(`export interface ${title} {`);
  for (const m of methods) outLines.push(`  ${m}: ${fn(m)};`);
  outLines.push("}", "");
}

const requestMethods = docs.request.properties.method.enum;
for (const m of requestMethods) {
  if (!(m + "Params" in docs.request.$defs)) fail(`request.schema.json has no $defs/${m}Params`);
  if (!(m + "Result" in docs.response.$defs)) fail(`response.schema.json has no $defs/${m}Result`);
}
methodMap("Methods", requestMethods, (m) => `{ params: ${pascal(m + "Params")}; result: ${pascal(m + "Result")} }`);
outLines.push(`export const methodNames = ${literal(requestMethods)} as const;`, "");

const allNoteMethods = docs.notification.properties.method.enum;
for (const m of allNoteMethods) {
  if (!(m + "Params" in docs.notification.$defs)) fail(`notification.schema.json has no $defs/${m}Params`);
}
// A session's notifications carry a seq (its log); the ones sent only to the
// connection that serves a client-run tool do not, and get their own union.
const hasSeq = (m) => (docs.notification.$defs[m + "Params"].required ?? []).includes("seq");
const noteMethods = allNoteMethods.filter(hasSeq);
const serveMethods = allNoteMethods.filter((m) => !hasSeq(m));
methodMap("NotificationParamsMap", noteMethods, (m) => pascal(m + "Params"));
outLines.push(
  "/** A notification of a session (it has a seq); switch on `method` to narrow `params`. */",
  "export type Notification = {",
  '  [M in keyof NotificationParamsMap]: { jsonrpc: "2.0"; method: M; params: NotificationParamsMap[M] };',
  "}[keyof NotificationParamsMap];",
  "",
);
outLines.push(`export const notificationNames = ${literal(noteMethods)} as const;`, "");
methodMap("ServeNotificationParamsMap", serveMethods, (m) => pascal(m + "Params"));
outLines.push(
  "/** A notification sent only to the connection that serves a client-run tool (no seq). */",
  "export type ServeNotification = {",
  '  [M in keyof ServeNotificationParamsMap]: { jsonrpc: "2.0"; method: M; params: ServeNotificationParamsMap[M] };',
  "}[keyof ServeNotificationParamsMap];",
  "",
);
outLines.push(`export const serveNotificationNames = ${literal(serveMethods)} as const;`, "");

const codes = docs.error.$defs.errorObject?.properties?.code?.enum;
if (!Array.isArray(codes)) fail("error.schema.json has no $defs/errorObject/properties/code/enum");
outLines.push(`/** Every error code the daemon may send. */`);
outLines.push(`export const errorCodes = ${literal(codes)} as const;`, "");

writeFileSync(out, outLines.join("\n"));
