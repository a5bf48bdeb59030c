// CuratorLeader drives one Apache Curator LeaderSelector candidate on an
// election path for zklock's election interoperability test (elect_test.go
// compiles it with javac and runs it). Usage:
//
//	java -cp DIR:/usr/share/java/curator-recipes.jar:/usr/share/java/slf4j-nop.jar \
//	    CuratorLeader HOST:PORT /election/path ID
//
// It prints "ready" once connected, then reads one command per line:
//
//	start          campaign (LeaderSelector.start); "leading" once elected
//	requeue        campaign again after a resign (LeaderSelector.requeue)
//	resign         end the leadership: "resigned"
//	leader         "leader ID" the current leader's id, "leader" if none
//	participants   "participants ID,ID..." in queue order
//
// LeaderSelector's nodes are InterProcessMutex's (_c_<uuid>-lock-<seq>) with
// the candidate's id as data. On end of input it closes the session.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Semaphore;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderSelector;
import org.apache.curator.framework.recipes.leader.LeaderSelectorListenerAdapter;
import org.apache.curator.framework.recipes.leader.Participant;
import org.apache.curator.retry.RetryNTimes;

public final class CuratorLeader {
    static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 3) {
            System.err.println("usage: CuratorLeader HOSTS PATH ID");
            System.exit(2);
        }
        CuratorFramework client = CuratorFrameworkFactory.newClient(args[0], 10000, 10000, new RetryNTimes(5, 200));
        client.start();
        client.blockUntilConnected();
        final Semaphore resign = new Semaphore(0);
        LeaderSelector selector = new LeaderSelector(client, args[1], new LeaderSelectorListenerAdapter() {
            @Override
            public void takeLeadership(CuratorFramework c) throws Exception {
                say("leading");
                try {
                    resign.acquire();
                } finally {
                    say("resigned");
                }
            }
        });
        selector.setId(args[2]);
        say("ready");
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line; (line = in.readLine()) != null;) {
            try {
                switch (line.trim()) {
                    case "start":
                        selector.start();
                        break;
                    case "requeue":
                        selector.requeue();
                        break;
                    case "resign":
                        resign.release();
                        break;
                    case "leader":
                        say(("leader " + selector.getLeader().getId()).trim());
                        break;
                    case "participants":
                        List<String> ids = new ArrayList<>();
                        for (Participant p : selector.getParticipants()) {
                            ids.add(p.getId());
                        }
                        say("participants " + String.join(",", ids));
                        break;
                    default:
                        say("error unknown command " + line);
                }
            } catch (Exception e) {
                say("error " + e);
            }
        }
        selector.close();
        client.close();
    }
}
