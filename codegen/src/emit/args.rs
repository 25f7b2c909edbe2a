//! One typed argument struct per tool, from its inputSchema.

use proc_macro2::TokenStream;
use quote::quote;
use serde_json::{Map, Value};

use super::registry::ident;
use crate::args::{RustType, pascal_case, rust_type};
use crate::names::field_name;
use crate::rules::{Checked, Handler};

/// Every tool gets its struct (the schema as Rust, for whoever writes its handler), but only
/// a Rust handler deserializes into it: builtins take the JSON as it is. A serde derive is the
/// costly part to compile (a 10,000-tool catalogue of builtins ran rustc out of 24 GiB), so
/// only the structs a handler uses derive `Deserialize`, and only those of tools that page
/// derive `Serialize` (a cursor is bound to the query it pages, read from the arguments).
pub fn emit(checked: &Checked) -> TokenStream {
    let mut items = Vec::new();
    for (tool, plan) in checked.tools.model.tools.iter().zip(&checked.plans) {
        let doc = format!("Arguments of `{}`.", tool.name);
        let rust = matches!(plan.handler, Handler::Rust { .. });
        let serde = Serde { read: rust, write: rust && tool.pages.is_some() };
        structure(&plan.struct_name, &doc, &tool.input_schema, serde, &mut items);
        if serde.write {
            items.push(paged(&plan.struct_name, &tool.input_schema));
        }
    }
    quote! {
        #[allow(unused_imports)]
        use serde::{Deserialize, Serialize};
        #(#items)*
    }
}

/// How a listing tool's arguments say which page they want (`toolgate_domain::Paged`); the
/// catalogue's `pages` rule made `cursor` and checked `offset` and `limit` are integers.
fn paged(name: &str, schema: &Map<String, Value>) -> TokenStream {
    let required: Vec<&str> =
        schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
    let declared = |prop: &str| schema.get("properties").and_then(|p| p.get(prop)).is_some();
    let position = |prop: &str| {
        let field = ident(&field_name(prop));
        match (declared(prop), required.contains(&prop)) {
            (false, _) => quote!(None),
            (true, true) => quote!(Some(self.#field)),
            (true, false) => quote!(self.#field),
        }
    };
    let (offset, limit) = (position("offset"), position("limit"));
    let name = ident(name);
    quote! {
        impl ::toolgate_domain::Paged for #name {
            fn cursor(&self) -> Option<&str> { self.cursor.as_deref() }
            fn offset(&self) -> Option<i64> { #offset }
            fn limit(&self) -> Option<i64> { #limit }
        }
    }
}

/// Which serde derives a struct gets.
#[derive(Clone, Copy)]
struct Serde {
    read: bool,
    write: bool,
}

fn structure(name: &str, doc: &str, schema: &Map<String, Value>, serde: Serde, items: &mut Vec<TokenStream>) {
    let props = schema.get("properties").and_then(Value::as_object).cloned().unwrap_or_default();
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut taken = std::collections::HashSet::new();
    let fields: Vec<TokenStream> = props
        .iter()
        .map(|(prop, prop_schema)| {
            let mut field = field_name(prop);
            while !taken.insert(field.clone()) {
                field.push('_');
            }
            let ty = type_tokens(&format!("{name}{}", pascal_case(prop)), prop_schema, serde, items);
            let field_ident = ident(&field);
            let rename = (serde.read && field != *prop).then(|| quote!(#[serde(rename = #prop)]));
            let doc = prop_schema.get("description").and_then(Value::as_str).map(|d| quote!(#[doc = #d]));
            if required.contains(&prop.as_str()) {
                quote!(#doc #rename pub #field_ident: #ty,)
            } else if serde.read {
                quote!(#doc #rename #[serde(default)] pub #field_ident: Option<#ty>,)
            } else {
                quote!(#doc pub #field_ident: Option<#ty>,)
            }
        })
        .collect();
    let name = ident(name);
    let derive = match serde {
        Serde { read: true, write: true } => quote!(#[derive(Debug, Clone, Deserialize, Serialize)]),
        Serde { read: true, write: false } => quote!(#[derive(Debug, Clone, Deserialize)]),
        _ => quote!(#[derive(Debug, Clone)]),
    };
    items.push(quote! {
        #[doc = #doc]
        #derive
        pub struct #name { #(#fields)* }
    });
}

fn type_tokens(nested_name: &str, schema: &Value, serde: Serde, items: &mut Vec<TokenStream>) -> TokenStream {
    match rust_type(schema) {
        RustType::Str => quote!(String),
        RustType::Int => quote!(i64),
        RustType::Float => quote!(f64),
        RustType::Bool => quote!(bool),
        RustType::FreeMap => quote!(serde_json::Map<String, serde_json::Value>),
        RustType::Untyped(_) => quote!(serde_json::Value),
        RustType::List(_) => {
            let inner =
                type_tokens(&format!("{nested_name}Item"), schema.get("items").unwrap_or(&Value::Null), serde, items);
            quote!(Vec<#inner>)
        }
        RustType::Object(obj) => {
            structure(nested_name, "A nested argument object.", &obj, serde, items);
            let id = ident(nested_name);
            quote!(#id)
        }
    }
}
