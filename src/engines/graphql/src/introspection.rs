//! Introspection as data: the schema rendered as JSON trees of the `__Schema`/`__Type`/...
//! types, which `complete` then walks with the query's selections like any resolved value.
//!
//! Type references are cyclic (a field's type has fields whose types ...), so a named type
//! inside another is a small marker object that `complete` expands on demand, only where the
//! selection reaches it. Deprecated items are always present; `complete` drops them unless
//! `includeDeprecated: true` was asked.

use serde_json::{Value as Json, json};

use crate::ast::TypeRef;
use crate::schema::Schema;
use crate::sdl::{InputValueDef, TypeKind};

/// Key of the marker object that stands for "the `__Type` named ...".
pub(crate) const TYPE_REF_KEY: &str = "\u{0}typeRef";

fn marker(name: &str) -> Json {
    json!({ TYPE_REF_KEY: name })
}

fn type_ref(t: &TypeRef) -> Json {
    match t {
        TypeRef::Named(n) => marker(n),
        TypeRef::List(i) => json!({"kind": "LIST", "name": null, "ofType": type_ref(i)}),
        TypeRef::NonNull(i) => json!({"kind": "NON_NULL", "name": null, "ofType": type_ref(i)}),
    }
}

fn input_value(v: &InputValueDef) -> Json {
    json!({
        "name": v.name,
        "description": v.description,
        "type": type_ref(&v.ty),
        "defaultValue": v.default.as_ref().map(|d| d.to_literal()),
        "isDeprecated": v.deprecation.is_some(),
        "deprecationReason": v.deprecation,
    })
}

/// The `__Schema` value.
pub(crate) fn schema_json(schema: &Schema) -> Json {
    let directives: Vec<Json> = schema
        .directives
        .iter()
        .map(|d| {
            json!({
                "name": d.name,
                "description": d.description,
                "isRepeatable": d.repeatable,
                "locations": d.locations,
                "args": d.args.iter().map(input_value).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({
        "description": schema.description,
        "types": schema.order.iter().map(|n| marker(n)).collect::<Vec<_>>(),
        "queryType": marker(&schema.query),
        "mutationType": schema.mutation.as_deref().map(marker),
        "subscriptionType": null,
        "directives": directives,
    })
}

/// The full `__Type` value of a named type, or `None` when the schema has no such type.
pub(crate) fn type_json(schema: &Schema, name: &str) -> Option<Json> {
    let t = schema.get(name)?;
    let has_fields = matches!(t.kind, TypeKind::Object | TypeKind::Interface);
    let fields = has_fields.then(|| {
        t.fields
            .iter()
            .map(|f| {
                json!({
                    "name": f.name,
                    "description": f.description,
                    "args": f.args.iter().map(input_value).collect::<Vec<_>>(),
                    "type": type_ref(&f.ty),
                    "isDeprecated": f.deprecation.is_some(),
                    "deprecationReason": f.deprecation,
                })
            })
            .collect::<Vec<_>>()
    });
    let interfaces = has_fields.then(|| t.interfaces.iter().map(|i| marker(i)).collect::<Vec<_>>());
    let possible = matches!(t.kind, TypeKind::Interface | TypeKind::Union)
        .then(|| schema.possible_types(name).into_iter().map(marker).collect::<Vec<_>>());
    let enum_values = (t.kind == TypeKind::Enum).then(|| {
        t.enum_values
            .iter()
            .map(|e| {
                json!({
                    "name": e.name,
                    "description": e.description,
                    "isDeprecated": e.deprecation.is_some(),
                    "deprecationReason": e.deprecation,
                })
            })
            .collect::<Vec<_>>()
    });
    let is_input = t.kind == TypeKind::InputObject;
    let input_fields = is_input.then(|| t.input_fields.iter().map(input_value).collect::<Vec<_>>());
    Some(json!({
        "kind": t.kind.introspection_name(),
        "name": t.name,
        "description": t.description,
        "specifiedByURL": t.specified_by,
        "fields": fields,
        "interfaces": interfaces,
        "possibleTypes": possible,
        "enumValues": enum_values,
        "inputFields": input_fields,
        "ofType": null,
        "isOneOf": if is_input { json!(false) } else { Json::Null },
    }))
}
