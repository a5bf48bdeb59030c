// CuratorLock drives Apache Curator InterProcessMutex contenders on one lock
// path for zklock's interoperability test (curator_test.go compiles it with
// javac and runs it). Usage:
//
//	java -cp DIR:/usr/share/java/curator-recipes.jar:/usr/share/java/slf4j-nop.jar \
//	    CuratorLock HOST:PORT[,HOST:PORT...] /lock/path [USER:PASSWORD]
//
// With USER:PASSWORD the session authenticates with the digest scheme and
// every node it creates carries CREATOR_ALL_ACL, as zklock.WithDigestAuth's.
//
// It prints "ready" once connected, then reads one command per line on stdin
// and answers on stdout, one line each. ID names a contender: each ID is its
// own InterProcessMutex with its own thread (a Curator mutex belongs to the
// thread that acquired it), so several IDs queue as separate contenders.
//
//	acquire ID     block until held, then "held ID NODE CZXID"
//	try ID MS      wait up to MS ms: "held ID NODE CZXID" or "busy ID"
//	release ID     "released ID"
//	nodes          "nodes NAME..." the contenders in Curator's order
//
// NODE is the name of the contender's lock node, CZXID its creation zxid
// (what zklock uses as the fencing token). Failures print "error ...". On
// end of input it releases nothing, closes the session and exits, so the
// server deletes its nodes.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.api.ACLProvider;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.retry.RetryNTimes;
import org.apache.curator.utils.ZKPaths;
import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.data.ACL;

public final class CuratorLock {
    /** Exposes the node of an acquired mutex, which Curator keeps protected. */
    static final class Mutex extends InterProcessMutex {
        Mutex(CuratorFramework client, String path) {
            super(client, path);
        }

        String node() {
            return getLockPath();
        }
    }

    /** One contender: a mutex and the only thread that touches it. */
    static final class Contender {
        final Mutex mutex;
        final ExecutorService thread = Executors.newSingleThreadExecutor();

        Contender(CuratorFramework client, String path) {
            mutex = new Mutex(client, path);
        }
    }

    static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    static void held(CuratorFramework client, String id, Mutex m) throws Exception {
        String node = m.node();
        long czxid = client.checkExists().forPath(node).getCzxid();
        say("held " + id + " " + ZKPaths.getNodeFromPath(node) + " " + czxid);
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 2 && args.length != 3) {
            System.err.println("usage: CuratorLock HOSTS PATH [USER:PASSWORD]");
            System.exit(2);
        }
        String path = args[1];
        CuratorFrameworkFactory.Builder builder = CuratorFrameworkFactory.builder().connectString(args[0])
                .sessionTimeoutMs(10000).connectionTimeoutMs(10000).retryPolicy(new RetryNTimes(5, 200));
        if (args.length == 3) {
            builder = builder.authorization("digest", args[2].getBytes(StandardCharsets.UTF_8))
                    .aclProvider(new ACLProvider() {
                        public List<ACL> getDefaultAcl() {
                            return ZooDefs.Ids.CREATOR_ALL_ACL;
                        }

                        public List<ACL> getAclForPath(String p) {
                            return ZooDefs.Ids.CREATOR_ALL_ACL;
                        }
                    });
        }
        CuratorFramework client = builder.build();
        client.start();
        if (!client.blockUntilConnected(20, TimeUnit.SECONDS)) {
            say("error not connected to " + args[0]);
            System.exit(1);
        }
        Mutex lister = new Mutex(client, path);
        Map<String, Contender> contenders = new HashMap<>();
        say("ready");

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line; (line = in.readLine()) != null;) {
            String[] f = line.trim().split("\\s+");
            try {
                switch (f[0]) {
                    case "acquire": {
                        String id = f[1];
                        Contender c = contenders.computeIfAbsent(id, k -> new Contender(client, path));
                        c.thread.execute(() -> {
                            try {
                                c.mutex.acquire();
                                held(client, id, c.mutex);
                            } catch (Exception e) {
                                say("error " + id + " acquire: " + e);
                            }
                        });
                        break;
                    }
                    case "try": {
                        String id = f[1];
                        long ms = Long.parseLong(f[2]);
                        Contender c = contenders.computeIfAbsent(id, k -> new Contender(client, path));
                        c.thread.execute(() -> {
                            try {
                                if (c.mutex.acquire(ms, TimeUnit.MILLISECONDS)) {
                                    held(client, id, c.mutex);
                                } else {
                                    say("busy " + id);
                                }
                            } catch (Exception e) {
                                say("error " + id + " try: " + e);
                            }
                        });
                        break;
                    }
                    case "release": {
                        String id = f[1];
                        Contender c = contenders.get(id);
                        if (c == null) {
                            say("error " + id + " release: unknown contender");
                            break;
                        }
                        c.thread.execute(() -> {
                            try {
                                c.mutex.release();
                                say("released " + id);
                            } catch (Exception e) {
                                say("error " + id + " release: " + e);
                            }
                        });
                        break;
                    }
                    case "nodes": {
                        List<String> names = new ArrayList<>();
                        for (String p : lister.getParticipantNodes()) {
                            names.add(ZKPaths.getNodeFromPath(p));
                        }
                        say("nodes " + String.join(" ", names));
                        break;
                    }
                    default:
                        say("error unknown command: " + line);
                }
            } catch (Exception e) {
                say("error " + line + ": " + e);
            }
        }
        for (Contender c : contenders.values()) {
            c.thread.shutdownNow();
        }
        client.close();
        System.exit(0);
    }
}
