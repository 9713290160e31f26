// Shared by validate.mjs, gen-types.mjs and the tests: the schemas of this directory, and an
// ajv instance that knows all of them (draft 2020-12, strict mode, formats).
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';

export const SCHEMA_DIR = dirname(fileURLToPath(import.meta.url));
export const ID_BASE = 'https://cortex-buffer.dev/schemas/';
const SUFFIX = '.schema.json';

/** Every `<name>.schema.json` here, sorted by name: [{ name, file, schema }]. */
export function loadSchemas(dir = SCHEMA_DIR) {
  return readdirSync(dir)
    .filter((f) => f.endsWith(SUFFIX))
    .sort()
    .map((f) => {
      const name = f.slice(0, -SUFFIX.length);
      const schema = JSON.parse(readFileSync(join(dir, f), 'utf8'));
      if (schema.$id !== `${ID_BASE}${name}.json`) {
        throw new Error(`${f}: $id must be ${ID_BASE}${name}.json, not ${schema.$id}`);
      }
      return { name, file: f, schema };
    });
}

/** An ajv (draft 2020-12, strict) holding every schema; compile errors throw. */
export function makeAjv(schemas = loadSchemas()) {
  const ajv = new Ajv2020({ strict: true, allowUnionTypes: true, allErrors: true, discriminator: true });
  addFormats(ajv);
  for (const { schema } of schemas) ajv.addSchema(schema);
  for (const { schema } of schemas) ajv.getSchema(schema.$id); // compiles, resolving every $ref
  return ajv;
}

/**
 * The schema a file's name names: the longest schema name that is the file's name (less
 * `.json`) or its prefix followed by `-` (`recovery_plan-stale.json` → recovery_plan).
 */
export function schemaForFile(fileName, names) {
  const base = fileName.replace(/^.*\//, '').replace(/\.json$/, '');
  let best = null;
  for (const n of names) {
    if ((base === n || base.startsWith(`${n}-`)) && (best === null || n.length > best.length)) best = n;
  }
  return best;
}

/** ajv's errors as lines: `<instance path> <message> (<schema path>)`. */
export function formatErrors(errors) {
  return (errors ?? []).map((e) => {
    const name = e.params?.additionalProperty ?? e.params?.propertyName;
    const extra = name !== undefined ? ` '${name}'` : '';
    return `${e.instancePath || '/'} ${e.message}${extra} (${e.schemaPath})`;
  });
}
