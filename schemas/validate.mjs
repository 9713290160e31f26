#!/usr/bin/env node
// node validate.mjs <dir>: validates every *.json under <dir> (recursively) against the schema
// its name names (<schema>-<anything>.json or <schema>.json; the longest matching name wins).
// Prints each failure with its file and ajv's error path, then `validated N answers against M
// schemas`; exits 1 on any failure, on a file whose name names no schema, or on no file at all.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { formatErrors, loadSchemas, makeAjv, ID_BASE, schemaForFile } from './lib.mjs';

function jsonFiles(dir) {
  const out = [];
  for (const entry of readdirSync(dir).sort()) {
    if (entry === 'node_modules') continue;
    const path = join(dir, entry);
    const st = statSync(path);
    if (st.isDirectory()) out.push(...jsonFiles(path));
    else if (entry.endsWith('.json')) out.push(path);
  }
  return out;
}

const dir = process.argv[2];
if (!dir) {
  console.error('usage: node validate.mjs <dir>');
  process.exit(2);
}
const root = resolve(dir);
const schemas = loadSchemas();
const names = schemas.map((s) => s.name);
const ajv = makeAjv(schemas);
const files = jsonFiles(root);
let failures = 0;
const used = new Set();
for (const file of files) {
  const rel = relative(root, file) || file;
  const name = schemaForFile(file, names);
  if (name === null) {
    console.error(`FAIL ${rel}: its name names no schema (expected <schema>-<case>.json; schemas: ${names.join(', ')})`);
    failures++;
    continue;
  }
  let doc;
  try {
    doc = JSON.parse(readFileSync(file, 'utf8'));
  } catch (e) {
    console.error(`FAIL ${rel}: not JSON: ${e.message}`);
    failures++;
    continue;
  }
  used.add(name);
  const validate = ajv.getSchema(`${ID_BASE}${name}.json`);
  if (!validate(doc)) {
    failures++;
    for (const line of formatErrors(validate.errors)) console.error(`FAIL ${rel} (${name}): ${line}`);
  }
}
if (files.length === 0) {
  console.error(`no *.json file under ${root}`);
  process.exit(1);
}
console.log(`validated ${files.length} answers against ${used.size} schemas${failures ? `: ${failures} failed` : ''}`);
process.exit(failures ? 1 : 0);
