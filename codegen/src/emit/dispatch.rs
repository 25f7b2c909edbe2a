//! `ToolId` -> handler call. Rust handlers get their typed arguments; builtins need none.

use proc_macro2::TokenStream;
use quote::quote;

use super::paths;
use super::registry::ident;
use crate::check::{Checked, Handler};

pub fn emit(checked: &Checked) -> TokenStream {
    let (handlers, context, result, typed) =
        (paths::handlers(), paths::tool_context(), paths::tool_result(), paths::typed_arguments());
    let arms = checked.plans.iter().map(|plan| {
        let id = ident(&plan.struct_name);
        match &plan.handler {
            Handler::Echo => {
                quote!(ToolId::#id => #handlers::builtin::echo(ctx, arguments).await,)
            }
            Handler::Static => {
                quote!(ToolId::#id => #handlers::builtin::static_result(tool.meta()),)
            }
            Handler::Rust { module, function } => {
                let path = module.iter().map(|m| ident(m));
                let function = ident(function);
                quote! {
                    ToolId::#id => {
                        let args = #typed::<args::#id>(arguments)?;
                        #handlers::#(#path::)*#function(ctx, args).await
                    }
                }
            }
        }
    });
    quote! {
        /// Runs the tool's handler. The gate has already checked tier, RBAC, approval and the
        /// arguments against the inputSchema before this is called.
        pub async fn dispatch(
            tool: ToolId,
            ctx: &#context,
            arguments: serde_json::Value,
        ) -> #result {
            match tool { #(#arms)* }
        }
    }
}

/// `pub mod area;` for each handler module the catalogue uses, and no other: a catalogue
/// built with TOOLGATE_TOOLS compiles without the shipped handlers it does not name.
pub fn modules(checked: &Checked, handlers_dir: &str) -> TokenStream {
    let mut used: Vec<&str> = checked
        .plans
        .iter()
        .filter_map(|p| match &p.handler {
            Handler::Rust { module, .. } => Some(module[0].as_str()),
            _ => None,
        })
        .collect();
    used.sort_unstable();
    used.dedup();
    let dir = std::path::Path::new(handlers_dir);
    let decls = used.iter().map(|m| {
        let file =
            if dir.join(format!("{m}.rs")).exists() { dir.join(format!("{m}.rs")) } else { dir.join(m).join("mod.rs") };
        let path = file.display().to_string();
        let m = ident(m);
        quote!(#[path = #path] pub mod #m;)
    });
    quote!(#(#decls)*)
}
