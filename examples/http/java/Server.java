// POST /orders with an Idempotency-Key: the idem HTTP mapping in Java (JDBC,
// com.sun.net.httpserver). The same steps as ../python/server.py, which
// docs/clients.md walks through. Run: java -cp postgresql.jar Server.java
// Environment: JDBC_URL, PORT (0: any free port, printed), WORK_MS.
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.Map;
import java.util.concurrent.Executors;

public class Server {
  static final String SCOPE = "orders";
  static final String URL = System.getenv("JDBC_URL");
  static final int WORK_MS = Integer.parseInt(System.getenv().getOrDefault("WORK_MS", "0"));

  // Hash the raw body in the claim statement: ?::jsonb (uncast it is 42725).
  static final String CLAIM =
      "SELECT c.kind::text, c.fence, c.response_code, c.response_body::text,"
          + " idem.retry_after(?, c)"
          + " FROM idem.claim_idempotency_key(?, ?, idem.request_hash(?::jsonb)) c";

  // The effect and its outcome in one transaction; the answer is the stored text.
  static final String TAKE_ORDER =
      "WITH o AS (INSERT INTO shop.orders (idempotency_key, item, quantity, served_by)"
          + " VALUES (?, ?::jsonb ->> 'item', (?::jsonb ->> 'quantity')::int, 'java')"
          + " RETURNING id, item, quantity)"
          + " SELECT a.response_code, a.response_body::text FROM o,"
          + " idem.mark_succeeded_returning(?, ?, ?, 201, jsonb_build_object("
          + "'order_id', o.id, 'item', o.item, 'quantity', o.quantity)) a";

  // SQLSTATE -> HTTP status (README, "Mapping to HTTP").
  static final Map<String, Integer> STATUS_OF_SQLSTATE =
      Map.of("P4000", 400, "P4001", 400, "P4003", 400, "P4005", 400, "22P02", 400,
          "P4002", 422, "P4012", 409);

  static void answer(HttpExchange exchange, int status, String body, String... headers)
      throws IOException {
    byte[] data = body.getBytes(StandardCharsets.UTF_8);
    exchange.getResponseHeaders().set("Content-Type", "application/json");
    for (int i = 0; i + 1 < headers.length; i += 2)
      exchange.getResponseHeaders().set(headers[i], headers[i + 1]);
    exchange.sendResponseHeaders(status, data.length);
    try (OutputStream out = exchange.getResponseBody()) {
      out.write(data);
    }
  }

  // Runs a statement with its parameters and returns its one row as text.
  static String[] row(Connection db, String sql, Object... parameters) throws SQLException {
    try (PreparedStatement statement = db.prepareStatement(sql)) {
      for (int i = 0; i < parameters.length; i++) statement.setObject(i + 1, parameters[i]);
      try (ResultSet result = statement.executeQuery()) {
        result.next();
        String[] columns = new String[result.getMetaData().getColumnCount()];
        for (int i = 0; i < columns.length; i++) columns[i] = result.getString(i + 1);
        return columns;
      }
    }
  }

  static String jsonString(String text) {
    return "\"" + text.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
  }

  static void order(HttpExchange exchange) throws IOException {
    String raw = new String(exchange.getRequestBody().readAllBytes(), StandardCharsets.UTF_8);
    String key = exchange.getRequestHeaders().getFirst("Idempotency-Key"); // null: P4001
    try (Connection db = DriverManager.getConnection(URL)) {
      String[] claim = row(db, CLAIM, SCOPE, SCOPE, key, raw);
      String kind = claim[0];
      if (kind.equals("replay_success") || kind.equals("final_failure")) {
        answer(exchange, Integer.parseInt(claim[2]), claim[3], "Idempotent-Replayed", "true");
        return;
      }
      if (kind.equals("processing_active")) {
        answer(exchange, 409, "{\"error\": \"a request with this key is in progress\"}",
            "Retry-After", claim[4]);
        return;
      }
      // new_claim, processing_stale, retryable_failure: do the work.
      db.setAutoCommit(false);
      if (WORK_MS > 0) row(db, "SELECT pg_sleep(?)", WORK_MS / 1000.0);
      String[] done = row(db, TAKE_ORDER, key, raw, raw, SCOPE, key, Long.parseLong(claim[1]));
      db.commit();
      answer(exchange, Integer.parseInt(done[0]), done[1]);
    } catch (SQLException error) {
      Integer status = STATUS_OF_SQLSTATE.get(error.getSQLState());
      if (status == null) {
        answer(exchange, 500, "{\"error\": \"internal error\"}");
        return;
      }
      String message = error.getMessage().split("\n")[0].replaceFirst("^ERROR: ", "");
      answer(exchange, status, "{\"error\": " + jsonString(message) + ", \"sqlstate\": "
          + jsonString(error.getSQLState()) + "}");
    }
  }

  public static void main(String[] args) throws IOException {
    HttpServer server =
        HttpServer.create(new InetSocketAddress("127.0.0.1", Integer.parseInt(System.getenv("PORT"))), 64);
    server.setExecutor(Executors.newFixedThreadPool(16));
    server.createContext("/orders", exchange -> {
      try {
        if (!exchange.getRequestMethod().equals("POST")) answer(exchange, 405, "{}");
        else order(exchange);
      } finally {
        exchange.close();
      }
    });
    server.start();
    // PORT=0 takes any free port; the line says which one.
    System.out.println("listening on port " + server.getAddress().getPort());
  }
}
