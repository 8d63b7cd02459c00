package pumping

// FieldsLua is the scripts' declaration of the hash fields, for a
// benchmark that loads another version of a script (rediscpu_test.go).
var FieldsLua = fieldsLua
