package api

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Role is what a credential may do. Operator includes everything a viewer may do.
type Role string

// Roles.
const (
	// RoleViewer reads: console pages, GET /api/*, the audit list and asynqmon's pages.
	RoleViewer Role = "viewer"
	// RoleOperator also acts: enqueue, resolve, steer, template controls and asynqmon's actions.
	RoleOperator Role = "operator"
)

// AllRoles lists the roles, weakest first.
func AllRoles() []Role { return []Role{RoleViewer, RoleOperator} }

// Valid reports whether r is a known role.
func (r Role) Valid() bool { return r == RoleViewer || r == RoleOperator }

// Allows reports whether a holder of r may do what need requires.
func (r Role) Allows(need Role) bool {
	rank := func(x Role) int {
		switch x {
		case RoleViewer:
			return 1
		case RoleOperator:
			return 2
		}
		return 0
	}
	return rank(r) > 0 && rank(r) >= rank(need)
}

// Credential is one token the server accepts. The token itself is never logged, stored in
// Redis, put in a cookie or an audit entry: sessions and CSRF tokens are HMACs keyed by its
// SHA-256.
type Credential struct {
	// Name identifies the credential. For a personal token it is the actor recorded for every
	// action; for a shared one it names the credential in the audit list.
	Name string
	Role Role
	// Token is the secret, or empty when SHA256 is given.
	Token string
	// SHA256 is the hex SHA-256 of the token, for tokens files that hold no secrets.
	SHA256 string
	// Shared marks a token several people use (OUTERLOOP_API_TOKEN, OUTERLOOP_VIEWER_TOKEN): the
	// name a person gives (the login form, X-Outerloop-Actor) is recorded as the actor, and the
	// credential's name next to it. A personal token's actor is always its Name.
	Shared bool
}

// Names of the shared credentials read from the environment.
const (
	// OperatorTokenName is the credential of OUTERLOOP_API_TOKEN.
	OperatorTokenName = "OUTERLOOP_API_TOKEN"
	// ViewerTokenName is the credential of OUTERLOOP_VIEWER_TOKEN.
	ViewerTokenName = "OUTERLOOP_VIEWER_TOKEN"
)

// Environment variables read by AuthFromEnv.
const (
	EnvOperatorToken = "OUTERLOOP_API_TOKEN"
	EnvViewerToken   = "OUTERLOOP_VIEWER_TOKEN"
	EnvTokensFile    = "OUTERLOOP_TOKENS_FILE"
	EnvReadLogin     = "OUTERLOOP_READ_LOGIN"
)

// MinTokenLength is the shortest token accepted from the environment or a tokens file: a
// shorter one is guessable even with rate-limited logins.
const MinTokenLength = 16

var credentialName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$`)

// tokensFile is the YAML of OUTERLOOP_TOKENS_FILE: one entry per person (or system), each with
// its role and where its token is: an environment variable (token_env) or the token's SHA-256
// (token_sha256, so the file holds no secret at all).
type tokensFile struct {
	Tokens []tokenEntry `yaml:"tokens"`
}

type tokenEntry struct {
	Name        string `yaml:"name"`
	Role        Role   `yaml:"role"`
	TokenEnv    string `yaml:"token_env"`
	TokenSHA256 string `yaml:"token_sha256"`
}

// ParseTokensFile reads a tokens file's YAML; getenv resolves token_env. Each problem is named
// with its entry.
func ParseTokensFile(data []byte, getenv func(string) string) ([]Credential, error) {
	var f tokensFile
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("tokens file: %w", err)
	}
	var out []Credential
	for i, e := range f.Tokens {
		where := fmt.Sprintf("tokens file: entry %d (%q)", i+1, e.Name)
		c := Credential{Name: e.Name, Role: e.Role}
		switch {
		case e.TokenEnv != "" && e.TokenSHA256 != "":
			return nil, fmt.Errorf("%s: give token_env or token_sha256, not both", where)
		case e.TokenEnv != "":
			c.Token = strings.TrimSpace(getenv(e.TokenEnv))
			if c.Token == "" {
				return nil, fmt.Errorf("%s: token_env %s is not set", where, e.TokenEnv)
			}
		case e.TokenSHA256 != "":
			c.SHA256 = strings.ToLower(strings.TrimSpace(e.TokenSHA256))
		default:
			return nil, fmt.Errorf("%s: token_env or token_sha256 is required", where)
		}
		out = append(out, c)
	}
	return out, nil
}

// validateCredentials checks names, roles, token lengths and uniqueness (a token shared by two
// entries would make the actor ambiguous).
func validateCredentials(cs []Credential) error {
	names, hashes := map[string]bool{}, map[string]string{}
	for _, c := range cs {
		if !credentialName.MatchString(c.Name) {
			return fmt.Errorf("credential %q: a name is 1-64 letters, digits and ._@- starting with a letter or digit", c.Name)
		}
		if names[c.Name] {
			return fmt.Errorf("credential %q: the name is used twice", c.Name)
		}
		names[c.Name] = true
		if !c.Role.Valid() {
			return fmt.Errorf("credential %q: role %q: want one of %v", c.Name, c.Role, AllRoles())
		}
		h := c.SHA256
		if c.Token != "" {
			sum := sha256.Sum256([]byte(c.Token))
			h = hex.EncodeToString(sum[:])
		} else if b, err := hex.DecodeString(h); err != nil || len(b) != sha256.Size {
			return fmt.Errorf("credential %q: token_sha256 is not 64 hex digits", c.Name)
		}
		if other, dup := hashes[h]; dup {
			return fmt.Errorf("credential %q: the same token as %q", c.Name, other)
		}
		hashes[h] = c.Name
	}
	return nil
}

// AuthFromEnv builds the server's Auth from the environment:
//
//   - OUTERLOOP_API_TOKEN: a shared operator token (as before roles existed);
//   - OUTERLOOP_VIEWER_TOKEN: a shared viewer token;
//   - OUTERLOOP_TOKENS_FILE: a YAML file of personal tokens (see ParseTokensFile);
//   - OUTERLOOP_READ_LOGIN=1: reading the console and GET /api/* needs a login too.
//
// o supplies the clock and limits; its Credentials and ReadLogin are filled from the
// environment.
func AuthFromEnv(getenv func(string) string, o AuthOptions) (*Auth, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	if t := strings.TrimSpace(getenv(EnvOperatorToken)); t != "" {
		o.Credentials = append(o.Credentials, Credential{Name: OperatorTokenName, Role: RoleOperator, Token: t, Shared: true})
	}
	if t := strings.TrimSpace(getenv(EnvViewerToken)); t != "" {
		o.Credentials = append(o.Credentials, Credential{Name: ViewerTokenName, Role: RoleViewer, Token: t, Shared: true})
	}
	if path := getenv(EnvTokensFile); path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", EnvTokensFile, err)
		}
		cs, err := ParseTokensFile(data, getenv)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", EnvTokensFile, path, err)
		}
		o.Credentials = append(o.Credentials, cs...)
	}
	// OUTERLOOP_API_TOKEN predates this check and keeps working when short; every newer token
	// must be long enough not to be guessed.
	for _, c := range o.Credentials {
		if c.Name != OperatorTokenName && c.Token != "" && len(c.Token) < MinTokenLength {
			return nil, fmt.Errorf("credential %q: the token is shorter than %d characters", c.Name, MinTokenLength)
		}
	}
	switch v := getenv(EnvReadLogin); v {
	case "", "0", "false":
	case "1", "true":
		o.ReadLogin = true
	default:
		return nil, fmt.Errorf("%s=%q: want 1 or 0", EnvReadLogin, v)
	}
	return NewAuthWith(o)
}

// errNoCredentials is a read login asked for with nothing to log in with.
var errNoCredentials = errors.New(EnvReadLogin + "=1 needs a token to log in with: set " + EnvOperatorToken +
	", " + EnvViewerToken + " or " + EnvTokensFile)

// Describe lists the configured credentials as "name (role)", for the startup log: names and
// roles only, never a token.
func (a *Auth) Describe() []string {
	out := make([]string, 0, len(a.creds))
	for _, c := range a.creds {
		out = append(out, fmt.Sprintf("%s (%s)", c.Name, c.Role))
	}
	return out
}
