/**
 * `@cortex-buffer/client`: a typed client for the cortex_buffer PostgreSQL extension (0.17.0).
 *
 * - the control plane's dispatch: {@link dispatch}, {@link mintPodEnv}, {@link PodEnv};
 * - the pod: {@link Pod} (token presentation, heartbeat loop, fenced checkpoints, budgets,
 *   recovery plans, pushed-file flushes);
 * - resuming: {@link Resumer} / {@link resume}, the keys ({@link callIdempotencyKey});
 * - the session writer: {@link SessionWriter};
 * - errors: {@link CortexBufferError} and its subclasses.
 *
 * Graphile Worker tasks are in `@cortex-buffer/client/graphile`.
 *
 * @module
 */
export * from "./errors.js";
export * from "./keys.js";
export * from "./plan.js";
export * from "./queryable.js";
export * from "./resume.js";
export * from "./session-writer.js";
export * from "./pod.js";
export * from "./dispatch.js";
/** The JSON Schemas' types (schemas/, generated: every jsonb answer and column a user reads). */
export type * as JsonTypes from "./generated/json.js";
/** Row types of every table function (generated from the install script). */
export type * as RowTypes from "./generated/rows.js";
