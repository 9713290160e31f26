export { cleanupSessionBuffersTask as default } from "@cortex-buffer/client/graphile";
