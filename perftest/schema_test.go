package perftest

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibgo/ibgo/internal/testutil"
)

// TestJSONSchemaDocumented keeps docs/perf-tools.md's JSON schema table in
// step with Record: every JSON field name must appear there.
func TestJSONSchemaDocumented(t *testing.T) {
	testutil.HostOnly(t, "reads docs/perf-tools.md")
	b, err := os.ReadFile("../docs/perf-tools.md")
	require.NoError(t, err)
	doc := string(b)
	i := strings.Index(doc, "## JSON output schema")
	require.GreaterOrEqual(t, i, 0, "docs/perf-tools.md has no JSON schema section")
	schema := doc[i:]
	rt := reflect.TypeOf(Record{})
	for f := range rt.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		require.Contains(t, schema, "`"+name+"`", "field %s (json %q) is not in the schema table", f.Name, name)
	}
}
