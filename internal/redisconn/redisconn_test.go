package redisconn

import (
	"strings"
	"testing"

	"github.com/hibiken/asynq"
)

func TestParseSentinelURL(t *testing.T) {
	t.Parallel()
	c, err := Parse("redis-sentinel://:secret@127.0.0.1:26379,127.0.0.1:26380/2?master=mymaster&sentinel_password=s3")
	if err != nil {
		t.Fatal(err)
	}
	if !c.Sentinel() {
		t.Fatal("want a sentinel connection")
	}
	o, ok := c.AsynqOpt().(asynq.RedisFailoverClientOpt)
	if !ok {
		t.Fatalf("asynq option %T, want RedisFailoverClientOpt", c.AsynqOpt())
	}
	if o.MasterName != "mymaster" || strings.Join(o.SentinelAddrs, ",") != "127.0.0.1:26379,127.0.0.1:26380" ||
		o.Password != "secret" || o.SentinelPassword != "s3" || o.DB != 2 {
		t.Fatalf("asynq option %+v", o)
	}
	if d := c.Describe(); strings.Contains(d, "secret") || !strings.Contains(d, "mymaster") {
		t.Fatalf("describe %q", d)
	}
}

func TestParseRefusesBadURLsNamingWhatIsWrong(t *testing.T) {
	t.Parallel()
	for url, want := range map[string]string{
		"redis-sentinel://127.0.0.1:26379":                     "master",
		"redis-sentinel://127.0.0.1:26379?master=m&colour=red": "colour",
		"redis-sentinel://127.0.0.1?master=m":                  "host:port",
		"redis-sentinel://127.0.0.1:26379/x?master=m":          "database",
		"redis-sentinel://:pw@127.0.0.1:26379,nope?master=m":   "does not parse",
		"http://127.0.0.1:6379":                                "scheme",
	} {
		_, err := Parse(url)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "pw") {
			t.Errorf("%s: %v, want an error naming %q", url, err, want)
		}
	}
}

func TestASingleServerURLKeepsItsOptions(t *testing.T) {
	t.Parallel()
	c, err := Parse("redis://:pw@127.0.0.1:6390/3")
	if err != nil {
		t.Fatal(err)
	}
	o, ok := c.AsynqOpt().(asynq.RedisClientOpt)
	if c.Sentinel() || !ok || o.Addr != "127.0.0.1:6390" || o.DB != 3 || o.Password != "pw" {
		t.Fatalf("%+v", c.AsynqOpt())
	}
}

func TestWaitDelayBacksOffToACap(t *testing.T) {
	t.Parallel()
	prev := WaitDelay(1)
	for n := 2; n <= 12; n++ {
		d := WaitDelay(n)
		if d > 33e9 || d < prev*8/10 {
			t.Fatalf("delay %d: %s after %s", n, d, prev)
		}
		prev = d
	}
}
