export { reapZombiesTask as default } from "@cortex-buffer/client/graphile";
