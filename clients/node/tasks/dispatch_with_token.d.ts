export { dispatchWithTokenTask as default } from "@cortex-buffer/client/graphile";
