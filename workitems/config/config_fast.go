package config

import (
	"reflect"
	"strings"
)

// fieldCache maps a struct type to its fields by YAML key for one parse: checkKeys visits every
// template's nested structs, and building the map at each visit was most of its cost at 10k
// templates.
type fieldCache map[reflect.Type]map[string]reflect.StructField

// fields returns t's fields by their YAML key.
func (fc fieldCache) fields(t reflect.Type) map[string]reflect.StructField {
	if m, ok := fc[t]; ok {
		return m
	}
	m := map[string]reflect.StructField{}
	for i := range t.NumField() {
		f := t.Field(i)
		if tag := strings.Split(f.Tag.Get("yaml"), ",")[0]; tag != "" && tag != "-" {
			m[tag] = f
		}
	}
	fc[t] = m
	return m
}
