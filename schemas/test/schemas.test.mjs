// The schemas compile in strict mode, every answer captured from a real cluster (fixtures/)
// validates against the schema its name names, and broken copies of them do not.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { ID_BASE, formatErrors, loadSchemas, makeAjv, schemaForFile } from '../lib.mjs';

const FIXTURES = join(dirname(fileURLToPath(import.meta.url)), 'fixtures');
const schemas = loadSchemas();
const names = schemas.map((s) => s.name);
const ajv = makeAjv(schemas);
const validator = (name) => ajv.getSchema(`${ID_BASE}${name}.json`);
const fixtureFiles = readdirSync(FIXTURES).filter((f) => f.endsWith('.json')).sort();
const fixture = (f) => JSON.parse(readFileSync(join(FIXTURES, f), 'utf8'));
const fixturesOf = (name) => fixtureFiles.filter((f) => schemaForFile(f, names) === name);

function assertValid(name, doc, label) {
  const v = validator(name);
  assert.ok(v(doc), `${label} should validate against ${name}:\n${formatErrors(v.errors).join('\n')}`);
}

function assertInvalid(name, doc, label, expect) {
  const v = validator(name);
  assert.equal(v(doc), false, `${label} should not validate against ${name}`);
  if (expect) {
    const lines = formatErrors(v.errors).join('\n');
    assert.match(lines, expect, `${label}: errors:\n${lines}`);
  }
}

test('every schema compiles on its own in strict mode, with its $id, title and description', () => {
  assert.ok(schemas.length >= 14, `schemas: ${names.join(', ')}`);
  for (const { name, schema } of schemas) {
    assert.equal(schema.$schema, 'https://json-schema.org/draft/2020-12/schema', name);
    assert.equal(schema.$id, `${ID_BASE}${name}.json`, name);
    assert.equal(typeof schema.title, 'string', `${name}: title`);
    assert.ok(schema.description?.length > 20, `${name}: description`);
    // Alone (with the schemas it references), strict: unknown keywords, types and formats throw.
    const alone = new Ajv2020({ strict: true, allowUnionTypes: true, discriminator: true });
    addFormats(alone);
    for (const other of schemas) if (other.name !== name) alone.addSchema(other.schema);
    assert.doesNotThrow(() => alone.compile(schema), name);
  }
});

test('every closed object says so, and every $defs entry has a description', () => {
  for (const { name, schema } of schemas) {
    const walk = (node, path) => {
      if (Array.isArray(node)) return node.forEach((x, i) => walk(x, `${path}/${i}`));
      if (node === null || typeof node !== 'object') return;
      if (node.type === 'object' && node.properties && !('additionalProperties' in node) && !path.includes('/if')) {
        // only the discriminator's tag declarations and if/then conditions may leave it open
        if (!node.discriminator && !/\/(then|else|allOf\/\d+)$/.test(path) && !/\/(then|else)\//.test(path)) {
          assert.fail(`${name}${path}: an object with properties must say additionalProperties`);
        }
      }
      for (const [k, v] of Object.entries(node)) walk(v, `${path}/${k}`);
    };
    walk(schema, '#');
    for (const [k, def] of Object.entries(schema.$defs ?? {})) {
      assert.ok(def.description, `${name}#/$defs/${k}: description`);
    }
  }
});

test('every fixture names a schema, and every schema but the payload union has fixtures', () => {
  assert.ok(fixtureFiles.length > 0);
  for (const f of fixtureFiles) assert.notEqual(schemaForFile(f, names), null, `${f} names no schema`);
  for (const name of names) {
    if (name === 'event_payload') continue; // its dialects' fixtures are checked against it below
    assert.ok(fixturesOf(name).length > 0, `no fixture for ${name}`);
  }
});

test('every answer captured from the cluster validates', () => {
  for (const f of fixtureFiles) assertValid(schemaForFile(f, names), fixture(f), f);
});

test('every payload fixture also validates against the union of the dialects', () => {
  const payloads = fixtureFiles.filter((f) => f.startsWith('event_payload_'));
  assert.ok(payloads.length > 0);
  for (const f of payloads) assertValid('event_payload', fixture(f), f);
});

test('the fixtures cover both modes, every action and the plan\'s optional parts', () => {
  const plans = fixturesOf('recovery_plan').map(fixture);
  const seen = (f) => new Set(plans.map(f).filter((x) => x !== undefined && x !== null));
  assert.deepEqual([...seen((p) => p.mode)].sort(), ['buffer', 'checkpoint_only']);
  assert.deepEqual([...seen((p) => p.action)].sort(), ['fail_job', 'first_run', 'resume']);
  for (const reason of ['marker_matched', 'marker_unverified', 'high_water_mark', 'checkpoint_time', 'no_checkpoint', 'latest_file', 'marker_mismatch', 'no_marker', 'file_untrusted', 'no_session_files', 'checkpoint_invalid']) {
    assert.ok(seen((p) => p.reason).has(reason), `a plan with reason ${reason}`);
  }
  assert.ok(plans.some((p) => p.fresh.stale), 'a stale plan');
  assert.ok(plans.some((p) => p.clock !== null), 'a plan with a clock');
  assert.ok(plans.some((p) => p.sessions.some((s) => s.pushed)), 'a plan with a pushed file');
  assert.ok(plans.some((p) => p.verify.some((v) => v.key_candidates.length > 0)), 'a verify entry with key candidates');
  assert.ok(plans.some((p) => p.verify.some((v) => v.results.length > 0)), 'a verify entry with results');
  assert.ok(plans.some((p) => p.completed.length > 0 && p.in_flight.length > 0), 'completed and in-flight calls');
  assert.ok(plans.some((p) => p.lost_events.length > 0 && p.anomalies.length > 0), 'lost events and anomalies');
  assert.ok(fixturesOf('session_recovery').length > 0);
});

// --- broken copies ----------------------------------------------------------------------------

const clone = (x) => structuredClone(x);
const matched = () => fixture('recovery_plan-marker-matched.json');
const checkpointOnly = () => fixture('recovery_plan-marker-mismatch.json');

test('a plan with a wrong mode fails', () => {
  const p = matched();
  p.mode = 'partial';
  assertInvalid('recovery_plan', p, 'mode partial', /\/mode/);
  const q = checkpointOnly();
  q.mode = 'buffer'; // a checkpoint_only plan's reason and NULL marker are no buffer plan's
  assertInvalid('recovery_plan', q, 'checkpoint_only relabelled buffer', /\/(reason|marker)/);
});

test('a checkpoint_only plan that lists calls fails', () => {
  const p = checkpointOnly();
  p.completed = clone(matched().completed);
  assertInvalid('recovery_plan', p, 'checkpoint_only with completed calls', /\/completed/);
});

test('a plan missing a required field fails', () => {
  for (const field of ['plan_version', 'fresh', 'notes', 'verify', 'clock']) {
    const p = matched();
    delete p[field];
    assertInvalid('recovery_plan', p, `without ${field}`, new RegExp(`required property '${field}'`));
  }
  const p = matched();
  delete p.in_flight[0].idempotency_key;
  assertInvalid('recovery_plan', p, 'in_flight without idempotency_key', /idempotency_key/);
  const s = fixture('session_recovery-transcript.json');
  delete s.session_id;
  assertInvalid('session_recovery', s, 'transcript plan without session_id', /session_id/);
});

test('an unknown field in a closed object fails', () => {
  const cases = [
    ['top level', (p) => { p.extra = 1; }, /\/ must NOT have additional properties 'extra'/],
    ['checkpoint', (p) => { p.checkpoint.extra = 1; }, /\/checkpoint .*'extra'/],
    ['fresh', (p) => { p.fresh.extra = 1; }, /\/fresh .*'extra'/],
    ['marker', (p) => { p.marker.extra = 1; }, /\/marker .*'extra'/],
    ['session', (p) => { p.sessions[0].extra = 1; }, /\/sessions\/0 .*'extra'/],
    ['integrity', (p) => { p.sessions[0].integrity.extra = 1; }, /\/sessions\/0\/integrity .*'extra'/],
    ['completed call', (p) => { p.completed[0].extra = 1; }, /\/completed\/0 .*'extra'/],
    ['verify result', (p) => { p.verify[0].results[0].extra = 1; }, /\/verify\/0\/results\/0 .*'extra'/],
    ['key candidate', (p) => { p.verify[1].key_candidates[0].extra = 1; }, /key_candidates\/0 .*'extra'/],
    ['lost event', (p) => { p.lost_events[0].extra = 1; }, /\/lost_events\/0 .*'extra'/],
    ['anomaly', (p) => { p.anomalies[0].extra = 1; }, /\/anomalies\/0 .*'extra'/],
  ];
  for (const [label, mutate, expect] of cases) {
    const p = matched();
    mutate(p);
    assertInvalid('recovery_plan', p, label, expect);
  }
  const t = fixture('recovery_plan-checkpoint-time.json');
  t.clock.segments[0].extra = 1;
  assertInvalid('recovery_plan', t, 'clock segment', /\/clock\/segments\/0 .*'extra'/);
  const s = fixture('session_recovery-transcript.json');
  s.job_id = s.session_id;
  assertInvalid('session_recovery', s, 'transcript plan with a job_id', /'job_id'/);
  const u = fixture('job_usage_unrecorded-plane.json');
  u.extra = 1;
  assertInvalid('job_usage_unrecorded', u, 'unrecorded', /'extra'/);
  const w = fixture('indexer_status_workers-one.json');
  w[0].extra = 1;
  assertInvalid('indexer_status_workers', w, 'worker', /'extra'/);
  const m = fixture('checkpoint_mark_files-plane.json');
  m[0].extra = 1;
  assertInvalid('checkpoint_mark_files', m, 'mark file', /'extra'/);
  const z = fixture('reaped_job_error-zombie-1.json');
  z.retry_decision.extra = 1;
  assertInvalid('reaped_job_error', z, 'retry decision', /'extra'/);
});

test('values outside the closed lists fail', () => {
  const cases = [
    ['action', (p) => { p.action = 'restart'; }, /\/action/],
    ['reason', (p) => { p.reason = 'guess'; }, /\/reason/],
    ['key_status', (p) => { p.completed[0].key_status = 'maybe'; }, /key_status/],
    ['key_source', (p) => { p.completed[0].key_source = 'hash'; }, /key_source/],
    ['verify reason', (p) => { p.verify[0].reason = 'unsure'; }, /\/verify\/0\/reason/],
    ['anomaly kind', (p) => { p.anomalies[0].kind = 'odd'; }, /\/anomalies\/0\/kind/],
    ['note', (p) => { p.notes = ['lost_events', 'hmm']; }, /\/notes\/1/],
    ['a repeated note', (p) => { p.notes = ['verify', 'verify']; }, /\/notes/],
    ['marker kind', (p) => { p.marker.kind = 'somewhere'; }, /\/marker/],
    ['checkpoint source', (p) => { p.checkpoint.source = 'elsewhere'; }, /\/checkpoint\/source/],
    ['plan_version', (p) => { p.plan_version = 2; }, /plan_version/],
    ['idempotency key', (p) => { p.in_flight[0].idempotency_key = 'ABC'; }, /idempotency_key/],
    ['checkpoint ref', (p) => { p.completed[0].checkpoint_ref = 'crc:-1'; }, /checkpoint_ref/],
    ['dialect', (p) => { p.sessions[0].dialect = 'yaml'; }, /dialect/],
    ['paired_by', (p) => { p.completed[0].paired_by = 'luck'; }, /paired_by/],
    ['a time', (p) => { p.marker.ts = 'yesterday'; }, /\/marker/],
    ['resume with no checkpoint', (p) => { p.checkpoint.source = 'none'; }, /\/checkpoint\/source/],
  ];
  for (const [label, mutate, expect] of cases) {
    const p = matched();
    mutate(p);
    assertInvalid('recovery_plan', p, label, expect);
  }
  const f = fixture('recovery_plan-fail-job.json');
  f.reason = 'no_marker';
  assertInvalid('recovery_plan', f, 'fail_job for another reason', /\/reason/);
  const t = fixture('recovery_plan-checkpoint-time.json');
  t.clock = null;
  assertInvalid('recovery_plan', t, 'checkpoint_time without its clock', /\/clock/);
  const z = fixture('reaped_job_error-zombie-1.json');
  z.retry_decision.strategy = 'later';
  assertInvalid('reaped_job_error', z, 'retry strategy', /strategy/);
  const w = fixture('indexer_status_workers-one.json');
  w[0].state = 'sleeping';
  assertInvalid('indexer_status_workers', w, 'worker state', /state/);
  const l = fixture('log_entry-trace-1.json');
  l.__seq__ = 1;
  assertInvalid('log_entry', l, 'a log entry keeps no __seq__', /__seq__/);
  const e = fixture('event_payload_cortex_spike-job-1.json');
  delete e.timestamp;
  assertInvalid('event_payload_cortex_spike', e, 'a spike line without timestamp', /timestamp/);
});

test('loose where the line is the agent\'s own', () => {
  const e = fixture('event_payload_cortex_spike-job-1.json');
  e.my_own_field = { any: ['thing'] };
  assertValid('event_payload_cortex_spike', e, 'a spike line with a key of its own');
  e.input_summary = { 'cortex_buffer:truncated': { bytes: 70000, head: 'abc' } };
  assertValid('event_payload_cortex_spike', e, 'a spike line with a truncated string');
  const d = fixture('checkpoint_document-spike.json');
  d.anything = [1, 'two', null];
  assertValid('checkpoint_document', d, 'a checkpoint with keys of its own');
  assertInvalid('checkpoint_document', [1, 2], 'a checkpoint that is no object');
  for (const v of [{ a: 1 }, [1], 'x', 1, true, null]) assertValid('crash_tokens', v, JSON.stringify(v));
});
