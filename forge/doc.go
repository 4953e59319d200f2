// Package forge owns outerloop's clients of code forges: one Forge interface over GitHub
// (go-github) and Gitea/Forgejo/Codeberg (the Gitea SDK), used by delivery (default branch,
// pull requests, labels, comments, merge) and by the verifier's CI evidence (check runs and
// commit statuses normalised to workitems.CheckState, as pull requests' states are to
// workitems.PRState), so a deployment has one client per entry of its forges: map. New builds one from a config.ForgeConfig.
//
// Tokens are read from the environment variable the forge names (token_env) each time they are
// used, so a rotated token is picked up without a restart; no token ever appears in a URL, an
// argv, a log line, an error, an event or a metric. API requests carry it in an Authorization
// header. git gets it through GitAuth: an http.<url>.extraHeader passed in GIT_CONFIG_COUNT/
// GIT_CONFIG_KEY_n/GIT_CONFIG_VALUE_n environment entries, scoped to the remote's origin (the
// same entries serve git fetch). RemoteBranch reads the branch's commit on the remote (the
// lease's expected value); Push runs `git push --force-with-lease=<branch>:<expected>` with it
// (PushArgs is its argv, with no credential in it) and classifies rejections; DeleteBranch
// pushes the branch's deletion under the same lease (DeleteArgs), so a finished branch is
// deleted only where outerloop left it, alike on every forge. git runs through proc: its own
// process group, a scrubbed environment, a timeout.
//
// A delivery step reads:
//
//	f, _ := forges.Get(tmpl.Deliver.Forge)        // a Set built by NewSet from forges:
//	repo, _ := f.Repository(ctx, tmpl.Deliver.Repo) // default branch, clone URL
//	auth, _ := f.GitAuth(repo.CloneURL)             // the token, read now
//	req := forge.PushRequest{Forge: f.Name(), Dir: ws, URL: repo.CloneURL, Branch: branch, Auth: auth}
//	req.Expected, _ = forge.RemoteBranch(ctx, req)
//	req.SHA = commit
//	err := forge.Push(ctx, req)                       // ErrStaleLease, ErrProtectedBranch, ErrAuth…
//	prs, _ := f.PullRequestsFor(ctx, tmpl.Deliver.Repo, branch) // open one? last closed one?
//	pr, _ := f.CreatePullRequest(ctx, tmpl.Deliver.Repo, forge.NewPullRequest{…})
//	checks, _ := f.Checks(ctx, tmpl.Deliver.Repo, commit)
//	pr, _ = f.MarkReady(ctx, tmpl.Deliver.Repo, pr.Number) // a draft, once CI is green
//	sha, _ := f.Merge(ctx, tmpl.Deliver.Repo, pr.Number, forge.MergeRequest{Method: …, ExpectedHeadSHA: commit})
//	req.Expected = commit
//	err = forge.DeleteBranch(ctx, req)                // only if still at commit: ErrStaleLease otherwise
//	old, _ := f.ClosePullRequest(ctx, tmpl.Deliver.Repo, obsolete) // unmerged; a merged one is ErrNotOpen
//
// The verifier reads a pull request's review as evidence:
//
//	pr, _ := f.PullRequest(ctx, repo, number)      // state, head SHA, merge commit, labels, body
//	reviews, _ := f.Reviews(ctx, repo, number)     // submitted reviews, oldest first, with inline comments
//	me, _ := f.Self(ctx)                           // outerloop's own login: its approvals never count
//	perm, _ := f.Permission(ctx, repo, r.User)     // perm.CanWrite(): an approval that can count
//
// Review states are normalised to ReviewState (approved, changes_requested, commented,
// dismissed); pending reviews and review requests are not reviews and are left out. A review is
// about its CommitSHA: one for another commit than the head is stale. What Reviews keeps is
// bounded, so a huge pull request cannot exhaust memory: the newest MaxReviews (100) reviews,
// MaxReviewComments (200) inline comments in all (the newest reviews' first), and bodies cut at
// MaxReviewBody (4 KiB) followed by a marker saying how many bytes were dropped. Permission is
// none, read, write or admin (the repository's owner is admin; a user the forge does not know is
// none). Self is cached per token (a hash of it), so a rotated token is asked about again.
//
// Every failure is an *Error with a workitems.ErrorClass (workitems.ClassOf finds it) and, where
// the caller must act differently, a sentinel found with errors.Is:
//
//	transient      5xx, network errors, primary and secondary rate limits (ErrRateLimited, with
//	               the server's reset time in RetryAt)
//	invalid_input  422 and other 4xx, bad arguments, a token variable that is unset (ErrMissingToken),
//	               closing a merged pull request or marking a closed draft ready (ErrNotOpen)
//	permission     401/403 (ErrAuth), a push the remote refused (ErrProtectedBranch)
//	not_found      404 (ErrNotFound)
//	conflict       405/409 on merge (ErrNotMergeable, ErrHeadMoved), a pull request that exists
//	               already (ErrPullRequestExists), a push whose lease was lost (ErrStaleLease)
//
// Waits (rate limits, Gitea indexing a pushed branch, Gitea checking mergeability) go through
// the injected workitems.Clock and are bounded; longer waits are returned as transient errors
// for the caller to schedule. A forge's rate limit is remembered in its HTTP client, shared by
// every call: after a 429 or 403 with Retry-After, or an answer with X-RateLimit-Remaining: 0
// and X-RateLimit-Reset, later requests wait for the reset (up to MaxRateWait and the caller's
// context) or, past MaxRateWait, fail at once with ErrRateLimited and RetryAt, without sending.
//
// Both forges are RepoListers: ListRepos lists an owner's repositories (an organisation, else
// a user; every page, bounded by MaxListedRepos), optionally with a topic, each with its clone
// URL, default branch, archived, empty and whether the token can pull it: what a fleet
// template's repos_from discovers (package fleet/discover). GitHub reports no emptiness: a
// repository of size 0 counts as empty.
//
// Forge is the union of what the consumers call; each consumer declares only its part
// (publish.Forge: delivery; verify.CIForge: CI; waits.ReviewForge and waits.CommandForge: pull
// requests, reviews, /outerloop commands), and a Set hands out whole Forges. New builds a forge
// with its kind's Constructor from Config.Kinds (default BuiltinKinds: github and gitea, the
// kinds config validation accepts); a program adds a kind by adding its Constructor to
// BuiltinKinds() and passing the map in NewSet's base Config. A kind embeds Unsupported for
// what it does not serve (ErrUnsupported, invalid_input). Example_aForgeKind registers an
// in-memory kind and delivers through it to a real git remote.
//
// Kind-specific behaviour, documented here once:
//   - GitHub: reviews are read from the first page and then the last pages (Link rel="last"),
//     which hold the newest; inline comments are read newest first (sort=created,
//     direction=desc) and grouped by pull_request_review_id; an outdated comment's line is its
//     original_line. Role names fold into permissions: maintain is write, triage is read.
//   - Gitea: reviews are read from the first page on (no last page is given; past 100 pages the
//     call fails rather than miss the newest); a dismissed review is dismissed whatever its
//     verdict, and Gitea itself dismisses a reviewer's earlier approval or change request when
//     they give a new one (on GitHub the earlier one keeps its state: take each reviewer's
//     latest); inline comments are read per review (comments_count > 0), newest review first,
//     in one response each (Gitea does not page them). The owner's permission "owner" is admin.
//   - GitHub: check runs and commit statuses are both read (latest per name; a check run wins
//     over a status of the same name); failed check runs can be re-requested (RerunChecks).
//     Labels missing on the repository are created by GitHub itself. REST cannot make a draft
//     ready: MarkReady posts the GraphQL mutation markPullRequestReadyForReview with the pull
//     request's node_id to the GraphQL endpoint beside the REST root (api.github.com/graphql;
//     HOST/api/graphql beside GitHub Enterprise's HOST/api/v3), through the same client, rate
//     gate and classification; GraphQL's errors come with 200 and are classified by their type
//     (NOT_FOUND, FORBIDDEN, RATE_LIMITED; others invalid_input).
//   - Gitea: commit statuses are the only CI results (Gitea Actions posts its jobs as statuses);
//     "warning" counts as failure, as Gitea's own combined status does. There are no draft pull
//     requests in the API: a draft is a title starting with one of Gitea's WIP prefixes (by
//     default "WIP:" and "[WIP]", in any case); a draft is opened with "WIP: ", a new title keeps
//     a draft a draft, and MarkReady removes the prefixes. Labels are ids: missing ones
//     are created. A pull request created right after a push can be refused with 404 while
//     Gitea indexes the branch; creation retries that briefly. After a push Gitea also moves the
//     pull request's head and re-checks mergeability asynchronously: Merge waits (briefly) for
//     the head to be the expected SHA and for "mergeable", and tells a head that really moved
//     (the branch is elsewhere: ErrHeadMoved) from one Gitea has not caught up with (transient).
//
// Tests: the Gitea client runs against a real Gitea server (lib/giteatest). GitHub itself
// is out of reach from the test environment, so the GitHub client is tested against an
// httptest server answering GitHub's documented REST shapes (pulls, reviews and review comments
// with Link paging, collaborator permissions, the authenticated user, issues labels and
// comments, check runs, commit statuses, repos, rate-limit headers, 403/429 secondary limits)
// and the one GraphQL mutation used (with GraphQL's error shapes); its pushes go to a real git
// remote.
package forge
