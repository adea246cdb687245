package main

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// redisStats reads a redis-server's counters: INFO's commandstats, stats,
// cpu and memory sections.
type redisStats struct {
	rdb *redis.Client
}

// A redisSnapshot is what INFO told at one moment.
type redisSnapshot struct {
	commands map[string]commandStat // by command ("evalsha", "incrby"), INFO and CONFIG left out
	reads    int64                  // total_reads_processed: reads of client sockets, about one per round trip
	cpu      float64                // used_cpu_user + used_cpu_sys, seconds: the whole server
	memory   int64                  // used_memory, bytes
}

// A commandStat is one command's calls and the microseconds the server
// spent running them (a script's commands count in the script's too).
type commandStat struct {
	calls, usec int64
}

// reset zeroes the server's command and read counts (CONFIG RESETSTAT).
func (r redisStats) reset(ctx context.Context) error {
	return r.rdb.ConfigResetStat(ctx).Err()
}

// flush removes every key (FLUSHALL), for a memory run from empty.
func (r redisStats) flush(ctx context.Context) error {
	return r.rdb.FlushAll(ctx).Err()
}

// snapshot reads the server's counters with one INFO.
func (r redisStats) snapshot(ctx context.Context) (redisSnapshot, error) {
	info, err := r.rdb.Info(ctx, "commandstats", "stats", "cpu", "memory").Result()
	if err != nil {
		return redisSnapshot{}, fmt.Errorf("INFO: %v", err)
	}
	return parseInfo(info)
}

// parseInfo reads the fields of an INFO answer that a snapshot holds.
func parseInfo(info string) (redisSnapshot, error) {
	s := redisSnapshot{commands: map[string]commandStat{}}
	var own int64 // reads of the measurement's own INFO and CONFIG
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		if name, ok := strings.CutPrefix(key, "cmdstat_"); ok {
			// cmdstat_evalsha:calls=12,usec=40,usec_per_call=...; subcommands as cmdstat_client|setinfo.
			name, _, _ = strings.Cut(name, "|")
			var c commandStat
			if _, err := fmt.Sscanf(val, "calls=%d,usec=%d,", &c.calls, &c.usec); err != nil {
				return s, fmt.Errorf("INFO commandstats: %q: %v", line, err)
			}
			if name == "info" || name == "config" {
				own += c.calls
				continue
			}
			t := s.commands[name]
			s.commands[name] = commandStat{t.calls + c.calls, t.usec + c.usec}
			continue
		}
		var err error
		switch key {
		case "total_reads_processed":
			s.reads, err = strconv.ParseInt(val, 10, 64)
		case "used_cpu_user", "used_cpu_sys":
			var f float64
			f, err = strconv.ParseFloat(val, 64)
			s.cpu += f
		case "used_memory":
			s.memory, err = strconv.ParseInt(val, 10, 64)
		}
		if err != nil {
			return s, fmt.Errorf("INFO: %s: %v", key, err)
		}
	}
	s.reads = max(s.reads-own, 0)
	return s, nil
}

// scriptCommands run a script, whose commands commandstats counts apart
// as well as in the script's time.
var scriptCommands = map[string]bool{"eval": true, "evalsha": true, "eval_ro": true, "evalsha_ro": true, "fcall": true, "fcall_ro": true}

// connectionCommands are commands no script runs: a client sent them.
var connectionCommands = map[string]bool{"ping": true, "hello": true, "client": true, "auth": true, "select": true, "script": true, "quit": true, "command": true}

// sent reports whether the command was sent by the clients of the
// service measured, whose data commands are all in scripts when scripted
// (slidegate's: scripts and connection commands), or none (envoyproxy/
// ratelimit's). Commands of the other kind are another service's
// background (slidegate's heartbeats) or a script's.
func sent(name string, scripted bool) bool {
	if scripted {
		return scriptCommands[name] || connectionCommands[name]
	}
	return !scriptCommands[name]
}

// usec returns the microseconds the server spent running the commands
// clients sent (a script's time holds its commands').
func (s redisSnapshot) usec(scripted bool) int64 {
	var n int64
	for name, c := range s.commands {
		if sent(name, scripted) {
			n += c.usec
		}
	}
	return n
}

// breakdown returns each command's calls and microseconds per decision,
// most time first, the commands scripts ran marked "in scripts"; a command
// of fewer than 0.005 calls a decision (the background of the services not
// measured) is left out.
func (s redisSnapshot) breakdown(decisions int64, scripted bool) string {
	type row struct {
		name string
		c    commandStat
	}
	var rows []row
	for name, c := range s.commands {
		rows = append(rows, row{name, c})
	}
	slices.SortFunc(rows, func(a, b row) int { return cmp.Or(cmp.Compare(b.c.usec, a.c.usec), strings.Compare(a.name, b.name)) })
	var parts []string
	d := float64(max(decisions, 1))
	for _, r := range rows {
		if float64(r.c.calls)/d < 0.005 {
			continue
		}
		p := fmt.Sprintf("%s %.2f calls, %.1f µs", strings.ToUpper(r.name), float64(r.c.calls)/d, float64(r.c.usec)/d)
		if !sent(r.name, scripted) {
			p += " (in scripts)"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, "; ")
}
