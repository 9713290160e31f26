// Graphile Worker task "cleanup_session_buffers": put this file (or a copy) in the worker's tasks directory.
// The task's code and options are in @cortex-buffer/client/graphile.
export { cleanupSessionBuffersTask as default } from "@cortex-buffer/client/graphile";
