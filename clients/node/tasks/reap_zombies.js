// Graphile Worker task "reap_zombies": put this file (or a copy) in the worker's tasks directory.
// The task's code and options are in @cortex-buffer/client/graphile.
export { reapZombiesTask as default } from "@cortex-buffer/client/graphile";
