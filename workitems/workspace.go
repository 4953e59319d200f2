package workitems

import (
	"time"
)

// BaseKind says where an attempt's base commit came from.
type BaseKind string

// The base kinds.
const (
	// BaseGit is a commit of the template's git repository, checked out from the worker's bare
	// mirror of it.
	BaseGit BaseKind = "git"
	// BaseCopy is a copy of a plain directory committed with a fixed author, committer and date,
	// so that every host makes the same commit from the same files.
	BaseCopy BaseKind = "copy"
	// BaseEmpty is an empty commit (a template without repo, or a repository without commits),
	// made as deterministically as BaseCopy.
	BaseEmpty BaseKind = "empty"
)

// AllBaseKinds lists every base kind.
func AllBaseKinds() []BaseKind { return []BaseKind{BaseGit, BaseCopy, BaseEmpty} }

// WorkspaceBase is where an attempt's workspace started. It is recorded on the attempt when the
// workspace is first prepared, so that any worker, on any host, can make the same base again.
type WorkspaceBase struct {
	Kind   BaseKind  `json:"kind"`
	Commit string    `json:"commit"`           // the base commit
	Tree   string    `json:"tree"`             // its tree
	Branch string    `json:"branch,omitempty"` // the source's default branch it was taken from (git)
	Source string    `json:"source,omitempty"` // the repo as configured, without credentials
	Mirror string    `json:"mirror,omitempty"` // the mirror's name under <workdir>/mirrors (git)
	Host   string    `json:"host,omitempty"`   // the worker that prepared it
	At     time.Time `json:"at"`
}

// WorkspaceSnapshot is the state of an attempt's working tree at a checkpoint or at its exit:
// the git tree id of every file that is not ignored, and the size of the binary diff from the
// base tree that recreates it. The diff itself is stored beside the checkpoint (Snapshot).
type WorkspaceSnapshot struct {
	Tree     string `json:"tree,omitempty"`
	Bytes    int    `json:"bytes"`               // size of the diff from the base tree
	TooLarge bool   `json:"too_large,omitempty"` // the diff passed the limit and is not stored
	Error    string `json:"error,omitempty"`     // why no tree could be taken
}

// Usable reports whether the snapshot can recreate its tree on another host.
func (s *WorkspaceSnapshot) Usable() bool {
	return s != nil && s.Tree != "" && !s.TooLarge && s.Error == ""
}

// DefaultSnapshotLimit bounds a stored workspace diff (8 MiB). Past it the snapshot is marked
// too large and a resume on another host starts the attempt over.
const DefaultSnapshotLimit = 8 << 20

// Snapshot is a workspace snapshot with its diff, as written to the store.
type Snapshot struct {
	WorkspaceSnapshot
	Patch []byte // binary diff from the base tree (git diff-tree -p --binary); empty: the base itself
}
