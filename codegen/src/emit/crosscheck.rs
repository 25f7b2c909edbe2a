//! Cross-check tests, one per tool: the runtime's hint invariants and its own evaluation of
//! the tier rules must agree with what the generator decided. Included by tests/suite/catalogue_crosscheck.rs.

use proc_macro2::TokenStream;
use quote::quote;

use super::registry::ident;
use crate::rules::Checked;

pub fn emit(checked: &Checked) -> TokenStream {
    let tests = checked.plans.iter().enumerate().map(|(i, plan)| {
        let id = ident(&plan.struct_name);
        let test = ident(&format!(
            "tool_{i}_{}",
            crate::names::field_name(&checked.tools.model.tools[i].name).trim_end_matches('_')
        ));
        let decisions = plan.decisions.iter().map(|d| {
            let v = ident(d.variant());
            quote!(Decision::#v)
        });
        quote! {
            #[test]
            fn #test() {
                crosscheck::hints_follow_class(ToolId::#id);
                crosscheck::decisions_match(ToolId::#id, &[#(#decisions),*]);
            }
        }
    });
    quote!(#(#tests)*)
}
