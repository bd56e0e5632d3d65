// Loopback HTTP proxy that adds `Authorization: Bearer $CONFORMANCE_AUTH_TOKEN`.
//
// Neither @modelcontextprotocol/conformance 0.1.16 nor 0.2.0-alpha.12 can send
// an Authorization header (no flag, no environment variable; upstream issue
// modelcontextprotocol/conformance#453 is open), so run.sh puts this proxy
// between the suite and a server that requires a bearer token.
//
// Everything else passes through unchanged: method, path, all request headers
// (Host and Origin too, so dns-rebinding-protection still tests the server),
// status, response headers, and streamed bodies (SSE). A request that already
// carries an Authorization header keeps its own.
//
// Env: PROXY_PORT (listen on 127.0.0.1), TARGET_PORT (server on 127.0.0.1),
// CONFORMANCE_AUTH_TOKEN (never printed).

import http from 'node:http';

const listenPort = Number(process.env.PROXY_PORT);
const targetPort = Number(process.env.TARGET_PORT);
const token = process.env.CONFORMANCE_AUTH_TOKEN;
if (!listenPort || !targetPort || !token) {
  console.error('auth-proxy: PROXY_PORT, TARGET_PORT and CONFORMANCE_AUTH_TOKEN are required');
  process.exit(2);
}

const agent = new http.Agent({ keepAlive: true });

const server = http.createServer((req, res) => {
  const headers = { ...req.headers };
  if (headers.authorization === undefined) headers.authorization = `Bearer ${token}`;
  const upstream = http.request(
    { host: '127.0.0.1', port: targetPort, method: req.method, path: req.url, headers, agent },
    (up) => {
      res.writeHead(up.statusCode ?? 502, up.statusMessage, up.headers);
      res.flushHeaders();
      up.pipe(res);
    },
  );
  upstream.on('error', (err) => {
    if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
    res.end(`auth-proxy: upstream error: ${err.code ?? err.message}\n`);
  });
  // The client went away (e.g. closed an SSE stream): close the upstream side too.
  res.on('close', () => upstream.destroy());
  req.pipe(upstream);
});

server.listen(listenPort, '127.0.0.1');
for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => process.exit(0));
