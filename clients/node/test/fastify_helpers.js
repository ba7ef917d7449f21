// A Fastify app on a free port, as helpers.listen does for Express.
'use strict';

async function listenFastify(app) {
  await app.listen({ port: 0, host: '127.0.0.1' });
  return {
    base: `http://127.0.0.1:${app.server.address().port}`,
    close: () => { app.server.closeAllConnections(); return app.close(); },
  };
}

module.exports = { listenFastify };
