/*
 * An Iceberg REST catalog on 127.0.0.1: Iceberg's own REST catalog servlet and adapter (the ones its
 * REST test fixture serves) over a JDBC catalog on a SQLite file, with its warehouse on the local
 * disk. Arguments: port, warehouse folder, SQLite file. Built and run by scripts/iceberg_rest.py
 * against the jars scripts/iceberg-rest/pom.xml resolves.
 */
import java.util.Map;
import org.apache.hadoop.conf.Configuration;
import org.apache.iceberg.CatalogProperties;
import org.apache.iceberg.jdbc.JdbcCatalog;
import org.apache.iceberg.rest.RESTCatalogAdapter;
import org.apache.iceberg.rest.RESTCatalogServlet;
import org.eclipse.jetty.ee10.servlet.ServletContextHandler;
import org.eclipse.jetty.ee10.servlet.ServletHolder;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;

public final class LoopbackRestCatalog {
  private LoopbackRestCatalog() {}

  public static void main(String[] args) throws Exception {
    int port = Integer.parseInt(args[0]);
    JdbcCatalog backend = new JdbcCatalog();
    backend.setConf(new Configuration());
    backend.initialize(
        "rest_backend",
        Map.of(
            CatalogProperties.URI, "jdbc:sqlite:" + args[2],
            CatalogProperties.WAREHOUSE_LOCATION, args[1],
            "jdbc.schema-version", "V1"));
    Server server = new Server();
    ServerConnector connector = new ServerConnector(server);
    connector.setHost("127.0.0.1");
    connector.setPort(port);
    server.addConnector(connector);
    ServletContextHandler context = new ServletContextHandler();
    context.setContextPath("/");
    context.addServlet(new ServletHolder(new RESTCatalogServlet(new RESTCatalogAdapter(backend))), "/*");
    server.setHandler(context);
    server.start();
    System.out.println("REST catalog listening on 127.0.0.1:" + port);
    System.out.flush();
    server.join();
  }
}
