// Run a Node MCP server that listens on every interface bound to 127.0.0.1 instead:
//   node loopback.mjs ENTRY.js [ARGS...]
// (server-everything's streamableHttp transport has no host setting; tests start
// servers on loopback only.)
import net from "node:net";
import { pathToFileURL } from "node:url";

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const port = args[0];
  if (typeof port === "number" || (typeof port === "string" && /^\d+$/.test(port))) {
    const rest = args.slice(1);
    if (typeof rest[0] === "string") rest.shift(); // a host given: replaced
    return listen.call(this, Number(port), "127.0.0.1", ...rest);
  }
  return listen.apply(this, args);
};
const [entry, ...rest] = process.argv.slice(2);
process.argv = [process.argv[0], entry, ...rest];
await import(pathToFileURL(entry).href);
