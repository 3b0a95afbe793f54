package zfstest

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// sess runs one command against the state: what one zfs process does.
type sess struct {
	st       *state
	now      time.Time
	out, err strings.Builder
	spaceTab map[string]*spaceInfo
	// stdin is what the command read from its standard input, up to its
	// end or the point where reading it failed (zfs receive).
	stdin []byte
}

func (s *sess) outf(format string, a ...any) { fmt.Fprintf(&s.out, format, a...) }
func (s *sess) errf(format string, a ...any) { fmt.Fprintf(&s.err, format, a...) }

// changed starts a new txg and forgets the space accounting.
func (s *sess) changed() {
	s.st.Txg++
	s.spaceTab = nil
}

// run dispatches argv (without the program name) of cmd "zfs" or "zpool".
func (s *sess) run(cmd string, args []string) int {
	switch cmd {
	case "zfs":
		return s.zfs(args)
	case "zpool":
		return s.zpool(args)
	}
	s.errf("zfstest: %s is not emulated\n", cmd)
	return 127
}

var zfsCommands = map[string]func(*sess, []string) int{
	"list":      (*sess).zfsList,
	"get":       (*sess).zfsGet,
	"create":    (*sess).zfsCreate,
	"destroy":   (*sess).zfsDestroy,
	"snapshot":  (*sess).zfsSnapshot,
	"snap":      (*sess).zfsSnapshot,
	"rollback":  (*sess).zfsRollback,
	"clone":     (*sess).zfsClone,
	"rename":    (*sess).zfsRename,
	"set":       (*sess).zfsSet,
	"inherit":   (*sess).zfsInherit,
	"mount":     (*sess).zfsMount,
	"unmount":   (*sess).zfsUnmount,
	"umount":    (*sess).zfsUnmount,
	"hold":      (*sess).zfsHold,
	"release":   (*sess).zfsRelease,
	"holds":     (*sess).zfsHolds,
	"version":   (*sess).zfsVersion,
	"send":      (*sess).zfsSend,
	"receive":   (*sess).zfsReceive,
	"recv":      (*sess).zfsReceive,
	"bookmark":  (*sess).zfsBookmark,
	"-V":        (*sess).zfsVersion,
	"--version": (*sess).zfsVersion,
}

func (s *sess) zfs(args []string) int {
	if len(args) == 0 {
		s.errf("usage: zfs command args ...\nwhere 'command' is one of the following:\n\n")
		for _, name := range []string{"version", "create", "destroy", "snapshot", "rollback", "clone", "rename", "list", "set", "get", "inherit", "mount", "unmount", "hold", "holds", "release"} {
			s.errf("%s", zfsUsage[name])
		}
		s.errf("\nEach dataset is of the form: pool/[dataset/]*dataset[@name]\n")
		return 2
	}
	if f, ok := zfsCommands[args[0]]; ok {
		return f(s, args[1:])
	}
	s.errf("unrecognized command '%s'\n", args[0])
	s.errf("usage: zfs command args ...\n")
	return 2
}

type opt struct {
	c   byte
	arg string
}

// getopt is glibc getopt(3) as zfs calls it: options may come after the
// operands, "--" ends them, "-Hp" clusters, "-ovalue" and "-o value" both
// work. spec is the optstring without the leading ':'.
func getopt(args []string, spec string) (opts []opt, operands []string, msg string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return opts, append(operands, args[i+1:]...), ""
		}
		if len(a) < 2 || a[0] != '-' {
			operands = append(operands, a)
			continue
		}
		for j := 1; j < len(a); j++ {
			c := a[j]
			k := strings.IndexByte(spec, c)
			if k < 0 || c == ':' {
				return nil, nil, fmt.Sprintf("invalid option '%c'\n", c)
			}
			if k+1 < len(spec) && spec[k+1] == ':' {
				switch {
				case j+1 < len(a):
					opts = append(opts, opt{c, a[j+1:]})
				case i+1 < len(args):
					i++
					opts = append(opts, opt{c, args[i]})
				default:
					return nil, nil, fmt.Sprintf("missing argument for '%c' option\n", c)
				}
				break
			}
			opts = append(opts, opt{c: c})
		}
	}
	return opts, operands, ""
}

// usage prints msg and the command's usage to stderr; zfs then exits 2.
func (s *sess) usage(cmd, msg string) int {
	s.errf("%s", msg)
	s.errf("usage:\n%s", zfsUsage[cmd])
	switch cmd {
	case "set", "get", "inherit", "list":
		s.errf("\nThe following properties are supported:\n")
		s.errf("\n\t%-14s %s  %s   %s\n\n", "PROPERTY", "EDIT", "INHERIT", "VALUES")
		sorted := append([]*propDef(nil), props...)
		sort.Slice(sorted, func(i, j int) bool { return sorted[i].name < sorted[j].name })
		for _, p := range sorted {
			edit, inherit := "YES    ", "   NO   "
			if p.readonly() {
				edit = " NO    "
			}
			if p.inheritable() {
				inherit = "  YES   "
			}
			values := p.values
			if values == "" {
				values = usageValues[p.name]
			}
			if values == "" {
				values = "-"
			}
			s.errf("\t%-15s %s%s%s\n", p.name, edit, inherit, values)
		}
		s.errf("\nSizes are specified in bytes with standard units such as K, M, G, etc.\n")
		s.errf("\nUser-defined properties can be specified by using a name containing a colon (:).\n")
	default:
		s.errf("\nFor the property list, run: zfs set|get\n")
		s.errf("\nFor the delegated permission list, run: zfs allow|unallow\n")
	}
	return 2
}

// zfsUsage is get_usage() of OpenZFS 2.1.
var zfsUsage = map[string]string{
	"clone":    "\tclone [-p] [-o property=value] ... <snapshot> <filesystem|volume>\n",
	"create":   "\tcreate [-Pnpv] [-o property=value] ... <filesystem>\n\tcreate [-Pnpsv] [-b blocksize] [-o property=value] ... -V <size> <volume>\n",
	"destroy":  "\tdestroy [-fnpRrv] <filesystem|volume>\n\tdestroy [-dnpRrv] <filesystem|volume>@<snap>[%<snap>][,...]\n\tdestroy <filesystem|volume>#<bookmark>\n",
	"get":      "\tget [-rHp] [-d max] [-o \"all\" | field[,...]]\n\t    [-t type[,...]] [-s source[,...]]\n\t    <\"all\" | property[,...]> [filesystem|volume|snapshot|bookmark] ...\n",
	"inherit":  "\tinherit [-rS] <property> <filesystem|volume|snapshot> ...\n",
	"list":     "\tlist [-Hp] [-r|-d max] [-o property[,...]] [-s property]...\n\t    [-S property]... [-t type[,...]] [filesystem|volume|snapshot] ...\n",
	"mount":    "\tmount\n\tmount [-flvO] [-o opts] <-a | filesystem>\n",
	"rename":   "\trename [-f] <filesystem|volume|snapshot> <filesystem|volume|snapshot>\n\trename -p [-f] <filesystem|volume> <filesystem|volume>\n\trename -u [-f] <filesystem> <filesystem>\n\trename -r <snapshot> <snapshot>\n",
	"rollback": "\trollback [-rRf] <snapshot>\n",
	"set":      "\tset <property=value> ... <filesystem|volume|snapshot> ...\n",
	"snapshot": "\tsnapshot [-r] [-o property=value] ... <filesystem|volume>@<snap> ...\n",
	"unmount":  "\tunmount [-fu] <-a | filesystem|mountpoint>\n",
	"hold":     "\thold [-r] <tag> <snapshot> ...\n",
	"holds":    "\tholds [-rH] <snapshot> ...\n",
	"release":  "\trelease [-r] <tag> <snapshot> ...\n",
	"version":  "\tversion\n",
	"send": "\tsend [-DnPpRVvLecwhb] [-[i|I] snapshot] <snapshot>\n\tsend [-DnVvPLecw] [-i snapshot|bookmark] <filesystem|volume|snapshot>\n" +
		"\tsend [-DnPpVvLec] [-i bookmark|snapshot] --redact <bookmark> <snapshot>\n\tsend [-nVvPe] -t <receive_resume_token>\n\tsend [-PnVv] --saved filesystem\n",
	"receive": "\treceive [-vMnsFhu] [-o <property>=<value>] ... [-x <property>] ...\n\t    <filesystem|volume|snapshot>\n" +
		"\treceive [-vMnsFhu] [-o <property>=<value>] ... [-x <property>] ... \n\t    [-d | -e] <filesystem>\n\treceive -A <filesystem|volume>\n",
	"bookmark": "\tbookmark <snapshot|bookmark> <newbookmark>\n",
}

var usageValues = map[string]string{
	"type": "filesystem | volume | snapshot | bookmark", "creation": "<date>",
	"used": "<size>", "available": "<size>", "referenced": "<size>", "written": "<size>",
	"usedbysnapshots": "<size>", "usedbydataset": "<size>", "usedbychildren": "<size>",
	"usedbyrefreservation": "<size>", "logicalused": "<size>", "logicalreferenced": "<size>",
	"compressratio": "<1.00x or higher if compressed>", "refcompressratio": "<1.00x or higher if compressed>",
	"mounted": "yes | no", "defer_destroy": "yes | no", "origin": "<snapshot>", "clones": "<dataset>[,...]",
	"quota": "<size> | none", "reservation": "<size> | none", "refquota": "<size> | none",
	"refreservation": "<size> | none", "recordsize": "512 to 1M, power of 2",
	"mountpoint": "<path> | legacy | none", "sharenfs": "on | off | share(1M) options",
	"sharesmb": "on | off | sharemgr(1M) options", "guid": "<uint64>", "createtxg": "<uint64>",
	"objsetid": "<uint64>", "userrefs": "<count>", "filesystem_limit": "<count> | none",
	"snapshot_limit": "<count> | none", "filesystem_count": "<count>", "snapshot_count": "<count>",
	"mlslabel": "<sensitivity label>", "context": "<selinux context>", "fscontext": "<selinux fscontext>",
	"defcontext": "<selinux defcontext>", "rootcontext": "<selinux rootcontext>",
	"keylocation": "prompt | <file URI>", "pbkdf2iters": "<iters>",
	"special_small_blocks": "zero or 512 to 1M, power of 2",
}

// openDataset is zfs_open: validate the name against types, then look it
// up. On failure it prints libzfs's "cannot open" line.
func (s *sess) openDataset(name string, types int) *dataset {
	if msg := validateName(name, types, false); msg != "" {
		s.errf("cannot open '%s': %s\n", name, msg)
		return nil
	}
	d := s.st.Datasets[name]
	if d == nil {
		s.errf("cannot open '%s': dataset does not exist\n", name)
		return nil
	}
	if d.Snap && types&tSnap == 0 || !d.Snap && types&tFS == 0 {
		s.errf("cannot open '%s': operation not applicable to datasets of this type\n", name)
		return nil
	}
	return d
}

// poolSuspended refuses a change on a pool whose I/O is suspended.
func (s *sess) poolSuspended(verb, name string) bool {
	if p := s.st.Pools[poolOf(name)]; p != nil && p.Health == "SUSPENDED" {
		s.errf("cannot %s '%s': pool I/O is currently suspended\n", verb, name)
		return true
	}
	return false
}

// zfsVersion prints what the captured system's zfs version printed
// (zfs-version.stdout).
func (s *sess) zfsVersion(args []string) int {
	s.outf("zfs-2.1.11-1+deb12u1\nzfs-kmod-2.1.11-1+deb12u1\n")
	return 0
}
