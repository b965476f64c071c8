package dynamo

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/rookery/rookery/table"
)

// Values map to DynamoDB types one to one: string S, int64 N, bool BOOL, []byte B, []string L of S.

func toAV(v any) types.AttributeValue {
	switch v := v.(type) {
	case string:
		return &types.AttributeValueMemberS{Value: v}
	case int64:
		return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
	case int:
		return &types.AttributeValueMemberN{Value: strconv.Itoa(v)}
	case bool:
		return &types.AttributeValueMemberBOOL{Value: v}
	case []byte:
		return &types.AttributeValueMemberB{Value: v}
	case []string:
		l := make([]types.AttributeValue, len(v))
		for i, s := range v {
			l[i] = &types.AttributeValueMemberS{Value: s}
		}
		return &types.AttributeValueMemberL{Value: l}
	}
	panic(fmt.Sprintf("dynamo: unchecked value type %T", v)) // table.CheckItem rejects these first
}

func fromAV(av types.AttributeValue) (any, error) {
	switch av := av.(type) {
	case *types.AttributeValueMemberS:
		return av.Value, nil
	case *types.AttributeValueMemberN:
		return strconv.ParseInt(av.Value, 10, 64)
	case *types.AttributeValueMemberBOOL:
		return av.Value, nil
	case *types.AttributeValueMemberB:
		return av.Value, nil
	case *types.AttributeValueMemberL:
		l := make([]string, len(av.Value))
		for i, e := range av.Value {
			s, ok := e.(*types.AttributeValueMemberS)
			if !ok {
				return nil, fmt.Errorf("dynamo: list element of type %T", e)
			}
			l[i] = s.Value
		}
		return l, nil
	}
	return nil, fmt.Errorf("dynamo: attribute of unsupported type %T", av)
}

func toAVMap(it table.Item) map[string]types.AttributeValue {
	m := make(map[string]types.AttributeValue, len(it))
	for k, v := range it {
		m[k] = toAV(v)
	}
	return m
}

func fromAVMap(m map[string]types.AttributeValue) (table.Item, error) {
	it := make(table.Item, len(m))
	for k, av := range m {
		v, err := fromAV(av)
		if err != nil {
			return nil, err
		}
		it[k] = v
	}
	return it, nil
}

func keyAV(k table.Key) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		table.PK: &types.AttributeValueMemberS{Value: k.PK},
		table.SK: &types.AttributeValueMemberS{Value: k.SK},
	}
}

// expr builds one request's expressions with placeholders: every attribute name becomes #nN and
// every value :vN, so no name ever collides with a DynamoDB reserved word.
type expr struct {
	names  map[string]string
	values map[string]types.AttributeValue
}

func newExpr() *expr {
	return &expr{names: map[string]string{}, values: map[string]types.AttributeValue{}}
}

func (e *expr) name(attr string) string {
	for ph, a := range e.names {
		if a == attr {
			return ph
		}
	}
	ph := "#n" + strconv.Itoa(len(e.names))
	e.names[ph] = attr
	return ph
}

func (e *expr) value(v any) string {
	ph := ":v" + strconv.Itoa(len(e.values))
	e.values[ph] = toAV(v)
	return ph
}

// namesOrNil and valuesOrNil return nil for empty maps: DynamoDB rejects empty expression maps.
func (e *expr) namesOrNil() map[string]string {
	if len(e.names) == 0 {
		return nil
	}
	return e.names
}

func (e *expr) valuesOrNil() map[string]types.AttributeValue {
	if len(e.values) == 0 {
		return nil
	}
	return e.values
}

var condOps = map[table.CondOp]string{
	table.OpEq: "=", table.OpNe: "<>", table.OpLt: "<", table.OpLe: "<=", table.OpGt: ">", table.OpGe: ">=",
}

// condition returns the condition expression for conds on a live item, and-ed with the guard that
// the item is not expired at now (see DB.retryExpired for why), or "" when guard is false and there
// are no conditions.
func (e *expr) condition(conds []table.Cond, guard bool, now int64) string {
	var parts []string
	for _, c := range conds {
		n := e.name(c.Attr)
		switch c.Op {
		case table.OpExists:
			parts = append(parts, "attribute_exists("+n+")")
		case table.OpNotExists:
			parts = append(parts, "attribute_not_exists("+n+")")
		case table.OpNe:
			// DynamoDB's <> is true for an absent attribute; the table contract says false.
			parts = append(parts, "(attribute_exists("+n+") AND "+n+" <> "+e.value(c.Value)+")")
		default:
			parts = append(parts, n+" "+condOps[c.Op]+" "+e.value(c.Value))
		}
	}
	if guard {
		t := e.name(table.TTL)
		parts = append(parts, "(attribute_not_exists("+t+") OR "+t+" > "+e.value(now)+")")
	}
	return strings.Join(parts, " AND ")
}

// update returns the update expression for u.
func (e *expr) update(u table.Update) string {
	var set, remove, add []string
	for attr, v := range u.Set {
		set = append(set, e.name(attr)+" = "+e.value(v))
	}
	for _, attr := range u.Remove {
		remove = append(remove, e.name(attr))
	}
	for attr, d := range u.Add {
		add = append(add, e.name(attr)+" "+e.value(d))
	}
	var b strings.Builder
	if len(set) > 0 {
		b.WriteString("SET " + strings.Join(set, ", ") + " ")
	}
	if len(remove) > 0 {
		b.WriteString("REMOVE " + strings.Join(remove, ", ") + " ")
	}
	if len(add) > 0 {
		b.WriteString("ADD " + strings.Join(add, ", "))
	}
	return strings.TrimSpace(b.String())
}

// keyCondition returns the key condition expression of a query on partition pk (attribute pkAttr)
// with sort-key attribute skAttr.
func (e *expr) keyCondition(pkAttr, skAttr, pk string, c table.SKCond) string {
	s := e.name(pkAttr) + " = " + e.value(pk)
	if c.Op == table.SKAll || c.Op == table.SKBeginsWith && c.Value == "" {
		return s
	}
	sk := e.name(skAttr)
	switch c.Op {
	case table.SKEq:
		return s + " AND " + sk + " = " + e.value(c.Value)
	case table.SKBeginsWith:
		return s + " AND begins_with(" + sk + ", " + e.value(c.Value) + ")"
	case table.SKBetween:
		return s + " AND " + sk + " BETWEEN " + e.value(c.Value) + " AND " + e.value(c.Value2)
	case table.SKLt:
		return s + " AND " + sk + " < " + e.value(c.Value)
	case table.SKLe:
		return s + " AND " + sk + " <= " + e.value(c.Value)
	case table.SKGt:
		return s + " AND " + sk + " > " + e.value(c.Value)
	case table.SKGe:
		return s + " AND " + sk + " >= " + e.value(c.Value)
	}
	return s
}
