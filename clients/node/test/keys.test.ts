// The keys are byte-identical to examples/node/keys.mjs and to the server's
// call_idempotency_key / checkpoint_crc / canonical_json.
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { after, test } from "node:test";
import { fileURLToPath, pathToFileURL } from "node:url";

import { callIdempotencyKey, callKey, canonicalJson, checkpointRef, crc32, inputHash, serverCallIdempotencyKey } from "@cortex-buffer/client";

import { admin, closeAdmin } from "./helpers.js";

after(closeAdmin);

const JOB = "0193A8B2-7C41-7D2E-9F00-5A1B2C3D4E5F";
const CASES: Array<[unknown, number, string, unknown]> = [
  [{ checkpoint_id: "0193a8b2-0000-7000-8000-0000000000c1", step_index: 0 }, 1, "charge_card", { amount: 42, currency: "USD", customer: "cus_123" }],
  [null, 1, "send_email", { to: "ops@example.com", body: "héllo ✓ \u0001" }],
  [{ b: [1.5, 1e21, { z: 1, a: [null, true] }], a: "x" }, 3, "t", { "10": 1, "9": 2, b: { d: 1, c: 2 } }],
  [{ step: 1 }, 2, "", null],
  [{ step: 1 }, 1, "tool", undefined],
];

test("golden CRCs of docs/design.md", () => {
  assert.equal(crc32(Buffer.from(canonicalJson({ hello: "world" }))), 3624485329);
  assert.equal(crc32(Buffer.from(canonicalJson({}))), 2745614147);
  assert.equal(checkpointRef({ step: 1 }), "crc:286895505");
  assert.equal(checkpointRef(null), "-");
});

test("the same keys as examples/node/keys.mjs", async (t) => {
  const here = fileURLToPath(new URL(".", import.meta.url));
  const mjs = `${here}/../../../../examples/node/keys.mjs`;
  if (!existsSync(mjs)) return t.skip("examples/node/keys.mjs is not beside this package");
  const ref = (await import(pathToFileURL(mjs).href)) as {
    callIdempotencyKey: typeof callIdempotencyKey;
    inputHash: typeof inputHash;
    checkpointRef: typeof checkpointRef;
    canonicalJson: typeof canonicalJson;
  };
  for (const [ck, n, tool, input] of CASES) {
    assert.equal(callIdempotencyKey(JOB, ck, n, tool, input), ref.callIdempotencyKey(JOB, ck, n, tool, input));
    assert.equal(inputHash(input), ref.inputHash(input));
    assert.equal(checkpointRef(ck), ref.checkpointRef(ck));
    assert.equal(canonicalJson(input ?? null), ref.canonicalJson(input ?? null));
  }
});

test("the same keys, CRCs and canonical JSON as the server", async () => {
  for (const [ck, n, tool, input] of CASES) {
    assert.equal(callIdempotencyKey(JOB, ck, n, tool, input), await serverCallIdempotencyKey(admin, JOB, ck, n, tool, input));
    assert.equal(callKey(JOB, checkpointRef(ck), n, tool, inputHash(input)), callIdempotencyKey(JOB, ck, n, tool, input));
    if (ck !== null) {
      const { rows } = await admin.query("SELECT cortex_buffer.checkpoint_crc($1::jsonb) AS crc, cortex_buffer.canonical_json($1::jsonb) AS text", [JSON.stringify(ck)]);
      assert.equal(checkpointRef(ck), `crc:${rows[0].crc}`);
      assert.equal(canonicalJson(ck), rows[0].text);
    }
  }
});
