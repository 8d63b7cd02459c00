package redisbatch

import (
	"context"
	"unsafe"

	"github.com/redis/go-redis/v9"
)

// evalSha queues script's EVALSHA with keys and args on pipe, as
// script.EvalSha does (the same command, the same arguments, the first key
// at 3), at a lower cost: go-redis boxes each key into the command's
// arguments, one allocation a key (21 for a US send's composed call);
// here the script's hash and the keys are copied into one slice the
// arguments point into, so a call of any number of keys costs three
// allocations: the command, its arguments and that copy. A single argument goes through go-redis, which flattens a slice or
// a map given alone. Scripts made with redis.NewScriptServerSHA are not
// meant for it (none is): their hash comes from the server.
func evalSha(ctx context.Context, pipe redis.Pipeliner, script *redis.Script, keys []string, args []any) *redis.Cmd {
	if len(args) == 1 {
		return script.EvalSha(ctx, pipe, keys, args...)
	}
	cmdArgs := make([]any, 3+len(keys), 3+len(keys)+len(args))
	// The hash and the keys, boxed without a copy each.
	owned := make([]string, 1+len(keys))
	owned[0] = script.Hash()
	copy(owned[1:], keys)
	cmdArgs[0] = "evalsha"
	cmdArgs[1] = stringAt(&owned[0])
	cmdArgs[2] = len(keys)
	for i := range keys {
		cmdArgs[3+i] = stringAt(&owned[1+i])
	}
	cmdArgs = append(cmdArgs, args...)
	cmd := redis.NewCmd(ctx, cmdArgs...)
	if len(keys) > 0 {
		cmd.SetFirstKeyPos(3)
	}
	_ = pipe.Process(ctx, cmd)
	return cmd
}

// stringAt is *s as an interface value, without copying *s to the heap as
// converting it would: the interface points at s itself, which must not
// change while the interface is in use (evalSha's copy of the keys is
// never written after).
func stringAt(s *string) any {
	var v any
	e := (*eface)(unsafe.Pointer(&v))
	e.typ, e.data = stringType, unsafe.Pointer(s)
	return v
}

// eface is the layout of an interface value of type any.
type eface struct {
	typ, data unsafe.Pointer
}

// stringType is the type word of an interface holding a string.
var stringType = func() unsafe.Pointer {
	var v any = ""
	return (*eface)(unsafe.Pointer(&v)).typ
}()
