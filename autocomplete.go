package atomicredis

import (
	"context"
	"strings"

	"github.com/gomodule/redigo/redis"
)

// ---------------------------------------------------------------------------
// Autocomplete (Redis in Action §6.1): a recent list, and prefix search on
// a sorted set

// AddRecent puts item at the front of the named recent list, removing any
// other copy, and keeps the newest N items (WithRecentCapacity, default
// 100). The item must not be empty.
func (e *Engine) AddRecent(ctx context.Context, list, item string) error {
	if e.hooked() {
		return hookedErr(e, ctx, Operation{ObjectRecentList, list, "AddRecent"}, func(ctx context.Context) error { return e.addRecent(ctx, list, item) })
	}
	return e.addRecent(ctx, list, item)
}

// addRecent is AddRecent.
func (e *Engine) addRecent(ctx context.Context, list, item string) error {
	obj, err := e.recentItem(list, item)
	if err != nil {
		return err
	}
	_, err = e.eval(ctx, obj, scriptRecentAdd, obj.key(""), item, e.recentCap)
	return err
}

// RemoveRecent removes item from the named recent list; an absent item is
// not an error.
func (e *Engine) RemoveRecent(ctx context.Context, list, item string) error {
	if e.hooked() {
		return hookedErr(e, ctx, Operation{ObjectRecentList, list, "RemoveRecent"}, func(ctx context.Context) error { return e.removeRecent(ctx, list, item) })
	}
	return e.removeRecent(ctx, list, item)
}

// removeRecent is RemoveRecent.
func (e *Engine) removeRecent(ctx context.Context, list, item string) error {
	obj, err := e.recentItem(list, item)
	if err != nil {
		return err
	}
	_, err = e.eval(ctx, obj, scriptRecentRemove, obj.key(""), item)
	return err
}

func (e *Engine) recentItem(list, item string) (object, error) {
	obj, err := e.object(kindRecent, list)
	if err == nil && item == "" {
		err = obj.errorf("empty item: %w", ErrInvalid)
	}
	return obj, err
}

// SuggestRecent returns up to limit items of the named recent list that
// match query, ignoring ASCII case, in three tiers: items equal to query,
// then items that start with it, then items that contain it elsewhere;
// each tier most recent first. The empty query matches every item, most
// recent first. The filtering happens on the server, in one script.
func (e *Engine) SuggestRecent(ctx context.Context, list, query string, limit int) ([]string, error) {
	if e.hooked() {
		return hooked(e, ctx, Operation{ObjectRecentList, list, "SuggestRecent"}, func(ctx context.Context) ([]string, error) { return e.suggestRecent(ctx, list, query, limit) })
	}
	return e.suggestRecent(ctx, list, query, limit)
}

// suggestRecent is SuggestRecent.
func (e *Engine) suggestRecent(ctx context.Context, list, query string, limit int) ([]string, error) {
	obj, err := e.limited(kindRecent, list, limit)
	if err != nil {
		return nil, err
	}
	return redis.Strings(e.eval(ctx, obj, scriptRecentSuggest, obj.key(""), query, limit))
}

// limited checks an object's name and a result limit (1 to 2^53 - 1).
func (e *Engine) limited(k *kind, name string, limit int) (object, error) {
	obj, err := e.object(k, name)
	if err != nil {
		return obj, err
	}
	if err := count("limit", limit, 1, ""); err != nil {
		return obj, obj.err(err)
	}
	return obj, nil
}

// AddMembers adds members (any bytes, the empty string too) to the named
// prefix-search set. With no members it does nothing.
func (e *Engine) AddMembers(ctx context.Context, set string, members ...string) error {
	if e.hooked() {
		return hookedErr(e, ctx, Operation{ObjectMemberSet, set, "AddMembers"}, func(ctx context.Context) error { return e.members(ctx, scriptMembersAdd, set, members) })
	}
	return e.members(ctx, scriptMembersAdd, set, members)
}

// RemoveMembers removes members from the named prefix-search set; absent
// ones are ignored. With no members it does nothing.
func (e *Engine) RemoveMembers(ctx context.Context, set string, members ...string) error {
	if e.hooked() {
		return hookedErr(e, ctx, Operation{ObjectMemberSet, set, "RemoveMembers"}, func(ctx context.Context) error { return e.members(ctx, scriptMembersRemove, set, members) })
	}
	return e.members(ctx, scriptMembersRemove, set, members)
}

func (e *Engine) members(ctx context.Context, s *script, set string, members []string) error {
	obj, err := e.object(kindMembers, set)
	switch {
	case err != nil:
		return err
	case ctx == nil:
		return obj.err(errNilContext)
	case len(members) == 0:
		return nil
	}
	args := make([]any, 0, len(members)+1)
	args = append(args, obj.key(""))
	for _, m := range members {
		args = append(args, m)
	}
	_, err = e.eval(ctx, obj, s, args...)
	return err
}

// Suggest returns up to limit members of the named set that start with
// prefix, compared as bytes, in byte order. The empty prefix matches every
// member. A query never adds, removes or hides a member, but it writes: it
// needs a writable server and a set whose members all have score 0 (as
// AddMembers gives them), and at maxmemory it may fail with OOM (see
// "Autocomplete" in the package doc).
func (e *Engine) Suggest(ctx context.Context, set, prefix string, limit int) ([]string, error) {
	if e.hooked() {
		return hooked(e, ctx, Operation{ObjectMemberSet, set, "Suggest"}, func(ctx context.Context) ([]string, error) { return e.suggest(ctx, set, prefix, limit) })
	}
	return e.suggest(ctx, set, prefix, limit)
}

// suggest is Suggest.
func (e *Engine) suggest(ctx context.Context, set, prefix string, limit int) ([]string, error) {
	obj, err := e.limited(kindMembers, set, limit)
	if err != nil {
		return nil, err
	}
	args := []any{obj.key(""), prefix, limit}
	if !e.plainSuggest.Load() {
		got, err := redis.Strings(e.eval(ctx, obj, scriptSuggestOOM, args...))
		if !shebangRefused(err) {
			return got, err
		}
		// The refusal changed nothing; the engine remembers it, so only its
		// first query pays the extra round trip.
		e.plainSuggest.Store(true)
	}
	return redis.Strings(e.eval(ctx, obj, scriptSuggest, args...))
}

// shebangRefused reports whether the server refused a script for its
// shebang line: before 7.0 Redis compiles "#!lua ..." as Lua and fails, as
// miniredis does; a server that knows shebangs but not a flag says so.
func shebangRefused(err error) bool {
	reply, ok := errorReply(err)
	return ok && (strings.Contains(string(reply), "Error compiling script") || strings.Contains(string(reply), "shebang"))
}
