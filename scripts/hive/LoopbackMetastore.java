/*
 * A Hive metastore (the Thrift service Spark's session catalog and the daemon ask for a table's
 * location and format) listening on 127.0.0.1 only. Hive 2.3's own `HiveMetaStore` main binds every
 * interface and has no setting to change that; this is its handler behind a loopback socket, with
 * the configuration (`-Djavax.jdo.option.ConnectionURL=…`, the warehouse) taken from system
 * properties as `HiveConf` reads them. Compiled and run against pyspark's own jars by
 * scripts/hive_metastore.py.
 */
import java.net.InetSocketAddress;
import org.apache.hadoop.hive.conf.HiveConf;
import org.apache.hadoop.hive.metastore.HiveMetaStore;
import org.apache.hadoop.hive.metastore.api.ThriftHiveMetastore;
import org.apache.thrift.protocol.TBinaryProtocol;
import org.apache.thrift.server.TThreadPoolServer;
import org.apache.thrift.transport.TServerSocket;
import org.apache.thrift.transport.TTransportFactory;

public final class LoopbackMetastore {
  private LoopbackMetastore() {}

  public static void main(String[] args) throws Exception {
    int port = Integer.parseInt(args[0]);
    HiveConf conf = new HiveConf();
    ThriftHiveMetastore.Iface handler = HiveMetaStore.newRetryingHMSHandler("loopback", conf, false);
    TServerSocket socket = new TServerSocket(new InetSocketAddress("127.0.0.1", port));
    TThreadPoolServer.Args server =
        new TThreadPoolServer.Args(socket)
            .processor(new ThriftHiveMetastore.Processor<>(handler))
            .protocolFactory(new TBinaryProtocol.Factory())
            .transportFactory(new TTransportFactory())
            .minWorkerThreads(2)
            .maxWorkerThreads(16);
    System.out.println("metastore listening on 127.0.0.1:" + port);
    System.out.flush();
    new TThreadPoolServer(server).serve();
  }
}
