// Generates src/generated/protocol.ts from the committed JSON Schema of
// protocol v9 (crates/protocol/schema). It only reads the schema and prints
// TypeScript; it never decides anything about the protocol itself.
//
// Every named type (a file's root, by its `title`, and every `$defs` entry)
// is emitted once, however many files repeat it; two different definitions
// under one name stop the generator, so a repetition can never hide a
// difference. The method map comes from `client_request.json` (method name
// and params) and `<method>.result.json` (the result's title); the
// notification map from `server_notification.json`. Every type whose
// values are a closed set of strings also gets its value list as a
// constant (`PermissionMode` -> `PERMISSION_MODE_VALUES`), and the protocol
// version is the `const` of `initialize`'s result.
//
// Run `npm run generate` to rewrite the file; the drift test calls
// `generateProtocol` in memory and compares.

import { readFileSync, readdirSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { isDeepStrictEqual } from "node:util";

const here = dirname(fileURLToPath(import.meta.url));

/** The schema directory of the repository, relative to this package. */
export const defaultSchemaDir = resolve(here, "../../../crates/protocol/schema");

/** Where the generated module is committed. */
export const generatedFile = resolve(here, "../src/generated/protocol.ts");

const identifier = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

function fail(message) {
  throw new Error(`generate-protocol: ${message}`);
}

/** `#/$defs/Name` -> `Name`. */
function refName(ref) {
  const match = /^#\/\$defs\/([A-Za-z0-9_]+)$/.exec(ref);
  if (!match) fail(`unsupported $ref ${JSON.stringify(ref)}`);
  return match[1];
}

function comment(description, indent) {
  if (typeof description !== "string" || description.length === 0) return "";
  const lines = description.replaceAll("*/", "*\\/").split("\n");
  return `${indent}/**\n${lines.map((line) => `${indent} *${line ? " " + line : ""}`).join("\n")}\n${indent} */\n`;
}

function literal(value) {
  return JSON.stringify(value);
}

function primitive(type) {
  switch (type) {
    case "string":
      return "string";
    case "integer":
    case "number":
      return "number";
    case "boolean":
      return "boolean";
    case "null":
      return "null";
    case "array":
      return "unknown[]";
    case "object":
      return "{ [key: string]: unknown }";
    default:
      return fail(`unsupported type ${JSON.stringify(type)}`);
  }
}

function union(parts) {
  const unique = [...new Set(parts)];
  return unique.length === 1 ? unique[0] : unique.join(" | ");
}

/** The TypeScript type of one schema node; `indent` is the current indentation. */
function typeOf(schema, indent) {
  if (schema === true || (typeof schema === "object" && schema !== null && Object.keys(schema).every((key) => key === "description"))) {
    return "unknown";
  }
  if (typeof schema !== "object" || schema === null) fail(`unsupported schema ${JSON.stringify(schema)}`);
  if (schema.$ref !== undefined) return refName(schema.$ref);
  if (schema.const !== undefined) return literal(schema.const);
  if (schema.enum !== undefined) return union(schema.enum.map(literal));
  for (const key of ["oneOf", "anyOf"]) {
    if (schema[key] !== undefined) {
      const branches = union(schema[key].map((branch) => {
        const type = typeOf(branch, indent);
        return type.includes("\n") || type.includes(" | ") ? `(${type})` : type;
      }));
      // Properties beside the union (an envelope's `id` and `jsonrpc`) hold in every branch.
      if (schema.properties === undefined) return branches;
      const { [key]: _branches, ...shared } = schema;
      return `${typeOf(shared, indent)} & (${branches})`;
    }
  }
  if (schema.allOf !== undefined) fail("allOf is not supported");
  const types = Array.isArray(schema.type) ? schema.type : [schema.type];
  return union(types.map((type) => {
    if (type === "object" && (schema.properties !== undefined || schema.additionalProperties === false)) {
      return objectType(schema, indent);
    }
    if (type === "array" && schema.items !== undefined) {
      const item = typeOf(schema.items, indent);
      return /^[A-Za-z0-9_"]+$/.test(item) ? `${item}[]` : `Array<${item}>`;
    }
    return primitive(type);
  }));
}

function objectType(schema, indent) {
  const properties = schema.properties ?? {};
  const required = new Set(schema.required ?? []);
  for (const name of required) {
    if (!(name in properties)) fail(`required property ${name} has no schema`);
  }
  const names = Object.keys(properties);
  if (names.length === 0) {
    return schema.additionalProperties === false ? "Record<string, never>" : "{ [key: string]: unknown }";
  }
  const inner = `${indent}  `;
  const lines = names.map((name) => {
    const key = identifier.test(name) ? name : literal(name);
    const optional = required.has(name) ? "" : "?";
    return `${comment(properties[name].description, inner)}${inner}${key}${optional}: ${typeOf(properties[name], inner)};`;
  });
  const rest = schema.additionalProperties === true ? [`${inner}[key: string]: unknown;`] : [];
  return `{\n${[...lines, ...rest].join("\n")}\n${indent}}`;
}

function readSchemas(schemaDir) {
  const files = readdirSync(schemaDir).filter((name) => name.endsWith(".json")).sort();
  if (files.length === 0) fail(`no schema files in ${schemaDir}`);
  return new Map(files.map((name) => [name, JSON.parse(readFileSync(join(schemaDir, name), "utf8"))]));
}

/** Strips the keys that describe a file rather than a type. */
function asDefinition(root) {
  const { $schema, $defs, title, ...definition } = root;
  return definition;
}

function collectDefinitions(schemas) {
  const definitions = new Map();
  const origin = new Map();
  const add = (name, definition, file) => {
    const known = definitions.get(name);
    if (known === undefined) {
      definitions.set(name, definition);
      origin.set(name, file);
    } else if (!isDeepStrictEqual(known, definition)) {
      fail(`${name} differs between ${origin.get(name)} and ${file}`);
    }
  };
  for (const [file, root] of schemas) {
    if (typeof root.title !== "string" || !identifier.test(root.title)) fail(`${file} has no usable title`);
    for (const [name, definition] of Object.entries(root.$defs ?? {})) add(name, definition, file);
    add(root.title, asDefinition(root), file);
  }
  return definitions;
}

/** `{method, params}` branches of a union file: `[[method, paramsTypeName]]`. */
function taggedBranches(schemas, file) {
  const root = schemas.get(file) ?? fail(`${file} is missing`);
  return (root.oneOf ?? fail(`${file} has no oneOf`)).map((branch) => {
    const method = branch.properties?.method?.const;
    const params = branch.properties?.params?.$ref;
    if (typeof method !== "string" || typeof params !== "string") fail(`${file}: a branch without method const or params $ref`);
    return [method, refName(params)];
  });
}

/** The string values of a closed enum (`enum`, or `oneOf` of `const`s), or `undefined`. */
function stringValues(definition) {
  if (Array.isArray(definition.enum) && definition.enum.every((value) => typeof value === "string")) return definition.enum;
  const branches = definition.oneOf;
  if (Array.isArray(branches) && branches.length > 0 && branches.every((branch) => typeof branch?.const === "string")) {
    return branches.map((branch) => branch.const);
  }
  return undefined;
}

/** `PermissionMode` -> `PERMISSION_MODE`. */
function screamingSnake(name) {
  return name.replace(/([a-z0-9])([A-Z])/g, "$1_$2").toUpperCase();
}

function fileTitle(schemas, file) {
  const root = schemas.get(file) ?? fail(`${file} is missing`);
  return root.title;
}

/** Generates the module text from the schema files in `schemaDir`. */
export function generateProtocol(schemaDir = defaultSchemaDir) {
  const schemas = readSchemas(schemaDir);
  const definitions = collectDefinitions(schemas);

  const methods = taggedBranches(schemas, "client_request.json").map(([method, params]) => {
    const base = method.replaceAll("/", ".");
    const paramsTitle = fileTitle(schemas, `${base}.params.json`);
    if (paramsTitle !== params) fail(`${method}: client_request.json says ${params}, ${base}.params.json says ${paramsTitle}`);
    return { method, params, result: fileTitle(schemas, `${base}.result.json`) };
  });
  const notifications = taggedBranches(schemas, "server_notification.json").map(([method, params]) => {
    const base = method.replaceAll("/", ".");
    const fileParams = fileTitle(schemas, `${base}.notification.json`);
    if (fileParams !== params) fail(`${method}: server_notification.json says ${params}, ${base}.notification.json says ${fileParams}`);
    return { method, params };
  });
  const errorCodes = definitions.get("CanonicalCode")?.enum ?? fail("no CanonicalCode enum");
  const protocolVersion = definitions.get("InitializeResult")?.properties?.protocolVersion?.const;
  if (!Number.isInteger(protocolVersion)) fail("InitializeResult.protocolVersion has no integer const");

  const out = [];
  out.push("// Generated by scripts/generate-protocol.mjs from crates/protocol/schema.");
  out.push("// Do not edit by hand: run `npm run generate` (the drift test compares).");
  out.push("");
  for (const name of [...definitions.keys()].sort()) {
    const definition = definitions.get(name);
    const type = typeOf(definition, "");
    const doc = comment(definition.description, "");
    if (type.startsWith("{\n") && type.endsWith("}")) out.push(`${doc}export interface ${name} ${type}\n`);
    else out.push(`${doc}export type ${name} = ${type};\n`);
  }
  out.push("/** The protocol version of the schema, sent in `initialize`. */");
  out.push(`export const PROTOCOL_VERSION = ${literal(protocolVersion)};`);
  out.push("");
  for (const name of [...definitions.keys()].sort()) {
    const values = stringValues(definitions.get(name));
    if (values === undefined || name === "CanonicalCode") continue;
    out.push(`/** Every {@link ${name}} value, in schema order. */`);
    out.push(`export const ${screamingSnake(name)}_VALUES = [${values.map(literal).join(", ")}] as const satisfies readonly ${name}[];`);
    out.push("");
  }
  out.push("/** The canonical `SCREAMING_SNAKE` error code of a refused request. */");
  out.push("export type ErrorCode = CanonicalCode;");
  out.push("");
  out.push("/** Every canonical error code, in schema order. */");
  out.push(`export const ERROR_CODES = [\n${errorCodes.map((code) => `  ${literal(code)},`).join("\n")}\n] as const satisfies readonly ErrorCode[];`);
  out.push("");
  out.push("/** Every client method with its params and result types. */");
  out.push("export interface Methods {");
  for (const { method, params, result } of methods) out.push(`  ${literal(method)}: { params: ${params}; result: ${result} };`);
  out.push("}");
  out.push("");
  out.push("/** Every client method name, in contract order. */");
  out.push(`export const METHOD_NAMES = [\n${methods.map(({ method }) => `  ${literal(method)},`).join("\n")}\n] as const satisfies readonly (keyof Methods)[];`);
  out.push("");
  out.push("/** Every host notification with its params type. */");
  out.push("export interface Notifications {");
  for (const { method, params } of notifications) out.push(`  ${literal(method)}: ${params};`);
  out.push("}");
  out.push("");
  out.push("/** Every notification name, in contract order. */");
  out.push(`export const NOTIFICATION_NAMES = [\n${notifications.map(({ method }) => `  ${literal(method)},`).join("\n")}\n] as const satisfies readonly (keyof Notifications)[];`);
  out.push("");
  return out.join("\n");
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  writeFileSync(generatedFile, generateProtocol());
  console.log(`wrote ${generatedFile}`);
}
