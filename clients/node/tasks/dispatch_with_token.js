// Graphile Worker task "dispatch_with_token": put this file (or a copy) in the worker's tasks directory.
// The task's code and options are in @cortex-buffer/client/graphile.
export { dispatchWithTokenTask as default } from "@cortex-buffer/client/graphile";
