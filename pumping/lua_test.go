package pumping

import (
	"io/fs"
	"reflect"
	"strings"
	"testing"

	"github.com/yuin/gopher-lua/ast"
	"github.com/yuin/gopher-lua/parse"
)

// maxLuaLines is the most lines a function of the scripts may take: one
// function a subject kind or a step, readable on one screen.
const maxLuaLines = 60

// luaFunction is a function of a script: its first and last line.
type luaFunction struct{ first, last int }

// luaChunk parses a script and lists its functions and the nodes under
// its main chunk (for the checks below).
func luaChunk(t *testing.T, name string) (src string, funcs []luaFunction, nodes []any) {
	t.Helper()
	b, err := fs.ReadFile(luaFiles, name)
	if err != nil {
		t.Fatal(err)
	}
	chunk, err := parse.Parse(strings.NewReader(string(b)), name)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	walkLua(reflect.ValueOf(chunk), func(n any) {
		nodes = append(nodes, n)
		if f, ok := n.(*ast.FunctionExpr); ok {
			funcs = append(funcs, luaFunction{f.Line(), f.LastLine()})
		}
	})
	return string(b), funcs, nodes
}

// walkLua calls visit on every AST node under v.
func walkLua(v reflect.Value, visit func(any)) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return
		}
		if v.Kind() == reflect.Pointer && v.Elem().Kind() == reflect.Struct {
			visit(v.Interface())
		}
		walkLua(v.Elem(), visit)
	case reflect.Slice:
		for i := range v.Len() {
			walkLua(v.Index(i), visit)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				walkLua(v.Field(i), visit)
			}
		}
	}
}

// TestLuaFunctionsAreShort holds the scripts to functions of at most
// maxLuaLines lines (comments inside included), and the main chunk to as
// many lines of code (the lines outside every function that are neither
// blank nor only a comment): what a script does is read one step at a
// time.
func TestLuaFunctionsAreShort(t *testing.T) {
	names, err := fs.Glob(luaFiles, "*.lua")
	if err != nil || len(names) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, name := range names {
		src, funcs, _ := luaChunk(t, name)
		lines := strings.Split(src, "\n")
		inside := make([]bool, len(lines)+2)
		for _, f := range funcs {
			if n := f.last - f.first + 1; n > maxLuaLines {
				t.Errorf("%s:%d: a function of %d lines (at most %d)", name, f.first, n, maxLuaLines)
			}
			for l := f.first; l <= f.last && l < len(inside); l++ {
				inside[l] = true
			}
		}
		main := 0
		for i, l := range lines {
			l = strings.TrimSpace(l)
			if !inside[i+1] && l != "" && !strings.HasPrefix(l, "--") {
				main++
			}
		}
		if main > maxLuaLines {
			t.Errorf("%s: a main chunk of %d lines of code (at most %d)", name, main, maxLuaLines)
		}
	}
}

// luaNotFields are string literals of the scripts that are no hash field
// although a field has the same name: the kinds of subject and of group
// (ARGV) a script compares with.
var luaNotFields = map[string]string{
	"n": "the network kind, and approve.lua's caller group",
	"d": "approve.lua's destination group",
}

// TestLuaFieldsAreDeclared holds the scripts to the fields fields.go
// declares: every F.<name> a script reads is declared, and no string
// literal spells a field's stored name.
func TestLuaFieldsAreDeclared(t *testing.T) {
	declared, stored := map[string]bool{}, map[string]string{}
	for _, f := range hashFields {
		if declared[f.lua] || stored[f.field] != "" {
			t.Errorf("field %s (%q) declared twice", f.lua, f.field)
		}
		declared[f.lua], stored[f.field] = true, f.lua
	}
	names, _ := fs.Glob(luaFiles, "*.lua")
	for _, name := range names {
		_, _, nodes := luaChunk(t, name)
		for _, n := range nodes {
			switch e := n.(type) {
			case *ast.AttrGetExpr:
				obj, ok1 := e.Object.(*ast.IdentExpr)
				key, ok2 := e.Key.(*ast.StringExpr)
				if ok1 && ok2 && obj.Value == "F" && !declared[key.Value] {
					t.Errorf("%s:%d: F.%s is not declared in fields.go", name, e.Line(), key.Value)
				}
			}
		}
		// Quoted literals only: st.S is the script's own table, not a field.
		src, _, _ := luaChunk(t, name)
		for i, line := range strings.Split(src, "\n") {
			for _, lit := range quoted(line) {
				if lua := stored[lit]; lua != "" && luaNotFields[lit] == "" {
					t.Errorf("%s:%d: the literal %q is field F.%s: name it", name, i+1, lit, lua)
				}
			}
		}
	}
}

// quoted lists the quoted string literals of a line of Lua, up to a
// comment.
func quoted(line string) []string {
	var out []string
	for i := 0; i < len(line); i++ {
		switch c := line[i]; {
		case c == '-' && strings.HasPrefix(line[i:], "--"):
			return out
		case c == '\'' || c == '"':
			j := strings.IndexByte(line[i+1:], c)
			if j < 0 {
				return out
			}
			out = append(out, line[i+1:i+1+j])
			i += j + 1
		}
	}
	return out
}
